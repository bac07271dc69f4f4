// The search box at the top of the sidebar. While it holds a query the
// conversation list gives way to the hits (GET /v1/search): who wrote it,
// where, and a snippet with the matches marked; a hit opens its
// conversation scrolled to the message. Marks are built as DOM nodes from
// the server's code point ranges, never as markup.

import { h, icon, replace } from './dom.js';
import { conversationTitle, shortTime, userName } from './format.js';
import { waitText } from '../api.js';

// As long as the server's snippets (chat.SearchSnippetRunes).
const SNIPPET_CHARS = 120;

/**
 * @param {import('../store/state.js').ChatState} state
 * @param {import('../api.js').Api} api
 * @param {{jump:(cid:number, seq:number)=>void}} actions
 * @param {EventTarget} [session] the MQTT session's events: hits that
 *   go stale while shown leave the list, edited ones show the new text
 */
export function createSearch(state, api, actions, session) {
  const input = h('input', {
    type: 'search',
    placeholder: 'Search messages',
    'aria-label': 'Search messages',
    'data-testid': 'search',
    enterkeyhint: 'search',
    autocomplete: 'off',
  });
  const list = h('ul', { class: 'search-results', 'data-testid': 'search-results', 'aria-label': 'Search results' });
  const more = h('button', { class: 'btn more', type: 'button', 'data-testid': 'search-more', hidden: true }, 'More results');
  const note = h('p', { class: 'search-note muted', 'data-testid': 'search-note' });
  const results = h('div', { class: 'search-pane', hidden: true }, note, list, more);
  const form = h('form', { class: 'search-box', role: 'search' }, icon('search'), input);
  const el = h('div', { class: 'search' }, form, results);

  let query = '';
  let cursor = '';
  let hits = [];
  let timer = 0;
  let seq = 0; // the newest request; older answers are dropped
  let ctl = new AbortController(); // the newest request's: a newer one (or none) stops its retries

  async function run(q, next = '') {
    const mine = ++seq;
    ctl.abort();
    ctl = new AbortController();
    note.textContent = next ? '' : 'Searching…';
    try {
      const page = await api.search({ q, cursor: next }, { signal: ctl.signal, onWait: (s, err) => (note.textContent = s ? waitText(s, err) : next ? '' : 'Searching…') });
      if (mine !== seq) return;
      hits = next ? hits.concat(page.results) : page.results;
      cursor = page.nextCursor;
      note.textContent = hits.length ? '' : `No messages match “${q}”.`;
      render();
    } catch (e) {
      if (mine !== seq) return;
      note.textContent = e.code === 'invalid' ? e.message : `Search failed: ${e.message}`;
      hits = [];
      cursor = '';
      render();
    }
  }

  function changed() {
    const q = input.value.trim();
    if (q === query) return;
    query = q;
    clearTimeout(timer);
    // The hits still on screen are the last query's: their "More results"
    // would page this one from their cursor, and stop its first page.
    cursor = '';
    more.hidden = true;
    el.closest('.sidebar')?.classList.toggle('searching', Boolean(q));
    results.hidden = !q;
    if (!q) {
      seq++;
      ctl.abort();
      hits = [];
      render();
      return;
    }
    timer = setTimeout(() => run(q), 250);
  }
  input.addEventListener('input', changed);
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      input.value = '';
      changed();
    }
  });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    clearTimeout(timer);
    if (query) run(query);
  });
  more.addEventListener('click', () => cursor && run(query, cursor));

  // A message recalled while its hit is on screen, or a conversation the
  // user is removed from: its text is not theirs to read any more, and a
  // search made now would not find it.
  session?.addEventListener('event', (e) => {
    const ev = e.detail;
    if (ev.type === 'message.edited') return edited(ev);
    let gone;
    if (ev.type === 'message.recalled') gone = (x) => x.conversationId === ev.conversationId && x.seq === ev.targetSeq;
    else if (ev.type === 'member.removed' && ev.userId === state.me) gone = (x) => x.conversationId === ev.conversationId;
    if (!gone || !hits.some(gone)) return;
    hits = hits.filter((x) => !gone(x));
    render();
  });

  // A hit whose message is edited while shown shows the new text, as the
  // conversation does (an empty one once a photo's caption is cleared),
  // cut as the server cuts a snippet and unmarked: the old text's ranges
  // say nothing of the new one. An edit marked bodyHidden (of a message
  // from before a join) tells nothing of the text; one older than the text
  // found (relayed after the search read the body) would bring back a
  // replaced text. Then the query is searched again for that message
  // alone (recheck).
  function edited(ev) {
    if (ev.bodyHidden) return;
    const was = hits.find((x) => x.conversationId === ev.conversationId && x.seq === ev.targetSeq);
    if (!was) return;
    if (was.editedAt && ev.editedAt && Date.parse(ev.editedAt) <= Date.parse(was.editedAt)) return;
    const now = { ...was, snippet: cut(ev.body ?? ''), highlights: [], editedAt: ev.editedAt || was.editedAt };
    hits = hits.map((x) => (x === was ? now : x));
    render();
    recheck(now);
  }

  // Whether an edited hit's new text still matches is the server's to
  // say (its folding of accents, scripts and CJK pairs is not repeated
  // here): the query is searched again in the hit's conversation, from its
  // sender, in the microsecond it was written, which holds that message
  // alone. Found, the hit takes the server's snippet and marks; not found,
  // it leaves the list, as a search made now would not list it. The
  // answer is dropped when the query changed, or the hit was edited again
  // meanwhile (that edit's search answers for it); a search that failed
  // leaves the new text shown unmarked.
  async function recheck(hit) {
    const q = query;
    const after = shiftMicros(hit.createdAt, -1), before = shiftMicros(hit.createdAt, 1);
    if (!after || !before) return;
    const same = (x) => x.conversationId === hit.conversationId && x.seq === hit.seq;
    let page;
    try {
      page = await api.search({ q, conversationId: hit.conversationId, senderId: hit.senderId, after, before, limit: 20 });
    } catch {
      return;
    }
    if (q !== query || !hits.includes(hit)) return;
    const found = page.results.find(same);
    hits = found ? hits.map((x) => (x === hit ? found : x)) : hits.filter((x) => x !== hit);
    render();
  }

  function snippet(hit) {
    const cps = Array.from(hit.snippet);
    const out = [];
    let at = 0;
    for (const [s, e] of hit.highlights || []) {
      if (s < at || e > cps.length) continue;
      if (s > at) out.push(cps.slice(at, s).join(''));
      out.push(h('mark', null, cps.slice(s, e).join('')));
      at = e;
    }
    if (at < cps.length) out.push(cps.slice(at).join(''));
    return out;
  }

  /** The first SNIPPET_CHARS characters of body, a cut marked as the server marks it. */
  function cut(body) {
    const cps = Array.from(body);
    return cps.length > SNIPPET_CHARS ? cps.slice(0, SNIPPET_CHARS).join('') + '…' : body;
  }

  function row(hit) {
    const c = state.conv(hit.conversationId);
    const where = c ? conversationTitle(c) : `Conversation ${hit.conversationId}`;
    return h(
      'li',
      null,
      h(
        'button',
        {
          type: 'button',
          class: 'hit-row',
          'data-testid': 'search-hit',
          'data-conv-id': hit.conversationId,
          'data-seq': hit.seq,
          onclick: () => actions.jump(hit.conversationId, hit.seq),
        },
        h('span', { class: 'hit-head' }, h('strong', null, where), h('time', null, shortTime(hit.createdAt))),
        h('span', { class: 'hit-who muted' }, userName(hit.senderId, state.me)),
        h('span', { class: 'hit-snippet' }, snippet(hit)),
      ),
    );
  }

  function render() {
    replace(list, hits.map(row));
    more.hidden = !cursor;
  }

  return { el, render, clear: () => ((input.value = ''), changed()) };
}

/**
 * RFC 3339 time t (chatd's: microseconds at most) moved by d microseconds,
 * written to the microsecond, chatd's precision; null when t is not one.
 */
export function shiftMicros(t, d) {
  const m = /^(.+T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(t || '');
  const secs = m && Date.parse(m[1] + m[3]);
  if (!m || !Number.isFinite(secs)) return null;
  const us = secs * 1000 + Number((m[2] || '').slice(0, 6).padEnd(6, '0')) + d;
  const s = Math.floor(us / 1e6);
  return `${new Date(s * 1000).toISOString().slice(0, 19)}.${String(us - s * 1e6).padStart(6, '0')}Z`;
}
