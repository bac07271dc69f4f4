// Unit tests of src/views/search.js, the sidebar's message search, on a
// small stand-in DOM (elements that keep their children, attributes and
// listeners). Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';

/** An Api whose searches wait until the test answers them. */
function pendingApi() {
  const calls = [];
  return {
    calls,
    search(p, req) {
      return new Promise((resolve, reject) => {
        calls.push({ q: p.q, cursor: p.cursor || '', p, resolve, reject });
        req?.signal?.addEventListener('abort', () => reject(Object.assign(new Error('cancelled'), { code: 'aborted' })));
      });
    },
  };
}

const hit = (seq, snippet) => ({ conversationId: 5, seq, senderId: 2, createdAt: '2026-01-01T10:00:00Z', snippet, highlights: [] });

/** Until cond() holds, or fails after 2 s. */
async function until(cond, what) {
  const end = Date.now() + 2000;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A search box of user 1 whose search for "cake" found results, shown;
 * event(detail) hands it an event of the connection, as main.js does.
 */
async function showingHits(results) {
  const { createSearch } = await import('../src/views/search.js');
  const api = pendingApi();
  const session = new EventTarget();
  const s = createSearch({ me: 1, conv: () => null }, api, { jump() {} }, session);
  const input = s.el.find('search');
  input.value = 'cake';
  input.dispatch('input');
  await until(() => api.calls.length === 1, 'the search');
  api.calls[0].resolve({ results, nextCursor: '' });
  await until(() => s.el.findAll('search-hit').length === results.length, 'the hits');
  return { s, api, event: (detail) => session.dispatchEvent(new CustomEvent('event', { detail })) };
}

test('"More results" of the last query, clicked while a new query is searched, neither pages the new query from the old one\'s cursor nor mixes their hits', async () => {
  const undo = fakeDocument();
  try {
    const { createSearch } = await import('../src/views/search.js');
    const api = pendingApi();
    const s = createSearch({ me: 1, conv: () => null }, api, { jump() {} });
    const input = s.el.find('search');
    const more = s.el.find('search-more');
    input.value = 'cake';
    input.dispatch('input');
    await until(() => api.calls.length === 1, 'the first search');
    api.calls[0].resolve({ results: [hit(10, 'cake at four')], nextCursor: 'after-10' });
    await until(() => !more.hidden, 'More results');

    // Another query; its first page is on its way when More is clicked.
    input.value = 'lunch';
    input.dispatch('input');
    await until(() => api.calls.length === 2, 'the search of the new query');
    more.dispatch('click');
    await new Promise((r) => setTimeout(r, 20));
    const paged = api.calls.slice(2).map((c) => `${c.q} cursor=${c.cursor}`);
    assert.deepEqual(paged, [], 'More paged the new query from the old query\'s cursor');

    api.calls[1].resolve({ results: [hit(20, 'lunch at noon')], nextCursor: '' });
    await until(() => s.el.findAll('search-hit').length === 1 && s.el.find('search-hit').textContent.includes('lunch'), 'the new query\'s hits');
  } finally {
    undo();
  }
});

test('a hit whose message is recalled, or of a conversation the user is removed from, leaves the results shown', async () => {
  const undo = fakeDocument();
  try {
    const { s, event } = await showingHits([hit(10, 'cake at four'), hit(11, 'no cake'), { ...hit(3, 'cake recipe'), conversationId: 6 }]);
    const shown = () => s.el.findAll('search-hit').map((b) => `${b.getAttribute('data-conv-id')}:${b.getAttribute('data-seq')}`);
    event({ type: 'message.recalled', conversationId: 5, seq: 12, targetSeq: 10, actorId: 2 });
    assert.deepEqual(shown(), ['5:11', '6:3'], 'a recalled message is still shown among the hits');
    event({ type: 'member.removed', conversationId: 6, userId: 2 }); // someone else
    assert.deepEqual(shown(), ['5:11', '6:3']);
    event({ type: 'member.removed', conversationId: 6, userId: 1 });
    assert.deepEqual(shown(), ['5:11'], 'a hit of a conversation the user was removed from is still shown');
  } finally {
    undo();
  }
});

test('a hit whose message is edited while shown shows the new text, unless the edit hides it; a cleared caption shows as empty', async () => {
  const undo = fakeDocument();
  try {
    const { s, event } = await showingHits([
      { ...hit(10, 'cake at four'), highlights: [[0, 4]] },
      { ...hit(11, 'no cake'), highlights: [[3, 7]] },
      { ...hit(3, 'cake recipe'), conversationId: 6, highlights: [[0, 4]], editedAt: '2026-01-01T11:00:00Z' },
    ]);
    const snippets = () => s.el.findAll('search-hit').map((b) => b.children.find((c) => c.className === 'hit-snippet'));
    const texts = () => snippets().map((t) => t.textContent);
    const marked = () => snippets().flatMap((t) => t.children.filter((c) => c.tag === 'mark').map((m) => m.textContent));
    const edit = (conversationId, targetSeq, body, more = {}) =>
      event({ type: 'message.edited', conversationId, seq: 40, targetSeq, senderId: 2, body, editedAt: '2026-01-01T12:00:00Z', ...more });

    edit(5, 10, 'see you at five');
    assert.deepEqual(texts(), ['see you at five', 'no cake', 'cake recipe'], 'an edited hit still shows the text it had');
    assert.deepEqual(marked(), ['cake', 'cake'], 'the old text\'s highlights were laid over the new text');

    edit(5, 11, '', { bodyHidden: true });
    edit(7, 10, 'another conversation');
    assert.deepEqual(texts(), ['see you at five', 'no cake', 'cake recipe'], 'an edit whose text is hidden, or of another conversation, changed a hit');

    edit(6, 3, 'an older caption', { editedAt: '2026-01-01T10:30:00Z' });
    assert.deepEqual(texts()[2], 'cake recipe', 'an edit older than the text found took its place');
    edit(6, 3, '');
    assert.deepEqual(texts(), ['see you at five', 'no cake', ''], 'a photo whose caption was cleared still shows its old caption');

    edit(5, 10, 'x'.repeat(5000), { editedAt: '2026-01-01T12:01:00Z' });
    assert.ok(Array.from(texts()[0]).length <= 121, `an edit's whole body of 5000 characters is shown in a hit (${Array.from(texts()[0]).length})`);
  } finally {
    undo();
  }
});

test('a hit whose message is edited while shown is searched again on its own: it stays, marked anew, while its new text matches the query, and leaves once it does not', async () => {
  const undo = fakeDocument();
  try {
    const { s, api, event } = await showingHits([{ ...hit(10, 'cake at four'), highlights: [[0, 4]] }, { ...hit(11, 'no cake'), highlights: [[3, 7]] }]);
    const rows = () => s.el.findAll('search-hit');
    const snippet = (b) => b.children.find((c) => c.className === 'hit-snippet');
    const shown = () => rows().map((b) => [snippet(b).textContent, snippet(b).children.filter((c) => c.tag === 'mark').map((m) => m.textContent)]);
    let at = 0;
    const edit = (targetSeq, body) =>
      event({ type: 'message.edited', conversationId: 5, seq: 40 + at, targetSeq, senderId: 2, body, editedAt: `2026-01-01T12:00:0${at++}Z` });

    edit(10, 'cheesecake at five');
    await until(() => api.calls.length === 2, 'the search of the edited hit');
    // That message alone: its conversation, its sender, the microsecond it was written in.
    assert.deepEqual(api.calls[1].p, { q: 'cake', conversationId: 5, senderId: 2, after: '2026-01-01T09:59:59.999999Z', before: '2026-01-01T10:00:00.000001Z', limit: 20 });
    api.calls[1].resolve({ results: [{ ...hit(10, 'cheesecake at five'), highlights: [[6, 10]] }], nextCursor: '' });
    await until(() => shown()[0][1].length === 1, 'the edited hit marked anew');
    assert.deepEqual(shown(), [['cheesecake at five', ['cake']], ['no cake', ['cake']]]);

    edit(11, 'see you at noon');
    await until(() => api.calls.length === 3, 'the search of the second edited hit');
    api.calls[2].resolve({ results: [], nextCursor: '' });
    await until(() => rows().length === 1, 'the hit that no longer matches leaves');
    assert.deepEqual(shown(), [['cheesecake at five', ['cake']]]);

    // Edited twice, the answers coming in the other order: the last edit's stands.
    edit(10, 'no dessert');
    edit(10, 'carrot cake');
    await until(() => api.calls.length === 5, 'the searches of both edits');
    api.calls[4].resolve({ results: [{ ...hit(10, 'carrot cake'), highlights: [[7, 11]] }], nextCursor: '' });
    await until(() => shown()[0][1].length === 1, 'the last edit marked');
    api.calls[3].resolve({ results: [], nextCursor: '' });
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(shown(), [['carrot cake', ['cake']]], 'the answer for an edit since replaced took the hit out');
  } finally {
    undo();
  }
});

test('a time is moved by microseconds as chatd writes it: any fraction, any offset, across a second', async () => {
  const { shiftMicros } = await import('../src/views/search.js');
  assert.equal(shiftMicros('2026-03-01T12:00:00.1234Z', 1), '2026-03-01T12:00:00.123401Z');
  assert.equal(shiftMicros('2026-03-01T12:00:00.999999+02:00', 1), '2026-03-01T10:00:01.000000Z');
  assert.equal(shiftMicros('2026-03-01T12:00:00Z', -1), '2026-03-01T11:59:59.999999Z');
  assert.equal(shiftMicros('not a time', 1), null);
});
