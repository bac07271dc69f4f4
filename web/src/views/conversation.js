// The open conversation: header, message list, typing line and composer.
// Message nodes are keyed by clientMsgId, so a pending message turns into
// the committed one in place (no flicker, the text selection survives), and
// re-renders touch only what changed.

import { h, icon, setText } from './dom.js';
import { avatar, clockTime, conversationTitle, dayLabel, systemText, typingText, userName } from './format.js';

/**
 * @param {import('../store/state.js').ChatState} state
 * @param {import('../store/sync.js').Sync} sync
 * @param {{back:()=>void, addMember:(cid:number)=>void, info:(cid:number)=>void}} actions
 */
export function createConversationView(state, sync, actions) {
  const titleEl = h('h2', { 'data-testid': 'chat-title' });
  const subtitleEl = h('p', { class: 'subtitle', 'data-testid': 'chat-subtitle' });
  const avatarSlot = h('span', { class: 'avatar-slot' });
  const addBtn = h(
    'button',
    { class: 'btn', type: 'button', 'data-testid': 'add-member', onclick: () => actions.addMember(state.openId) },
    icon('plus'),
    h('span', { class: 'label' }, 'Add member'),
  );
  const infoBtn = h(
    'button',
    { class: 'icon-btn', type: 'button', title: 'Details', 'aria-label': 'Conversation details', 'data-testid': 'info', onclick: () => actions.info(state.openId) },
    icon('info'),
  );
  const older = h('div', { class: 'older', 'data-testid': 'older' });
  const list = h('div', { class: 'message-list' });
  const scroller = h(
    'div',
    { class: 'messages', 'data-testid': 'messages', role: 'log', 'aria-live': 'polite', 'aria-relevant': 'additions' },
    older,
    list,
  );
  const typingEl = h('div', { class: 'typing-line', 'data-testid': 'typing', 'aria-live': 'polite' });
  const input = h('textarea', {
    rows: '1',
    placeholder: 'Write a message…',
    'aria-label': 'Message',
    'data-testid': 'composer',
    enterkeyhint: 'send',
  });
  const sendBtn = h('button', { class: 'send-btn', type: 'submit', title: 'Send', 'aria-label': 'Send', 'data-testid': 'send' }, icon('send'));
  const form = h('form', { class: 'composer' }, input, sendBtn);

  const el = h(
    'section',
    { class: 'chat', 'data-testid': 'conversation' },
    h(
      'header',
      { class: 'chat-head' },
      h('button', { class: 'icon-btn back', type: 'button', title: 'Back', 'aria-label': 'Back to conversations', 'data-testid': 'back', onclick: actions.back }, icon('back')),
      avatarSlot,
      h('div', { class: 'chat-title' }, titleEl, subtitleEl),
      addBtn,
      infoBtn,
    ),
    scroller,
    typingEl,
    form,
  );

  let shownId = null;
  /** @type {Map<string, {el:HTMLElement, update:(d:any)=>void}>} */
  let nodes = new Map();
  let stickToBottom = true;

  const send = () => {
    const cid = state.openId;
    const body = input.value;
    if (!cid || !body.trim()) return;
    input.value = '';
    autoGrow();
    stickToBottom = true;
    sync.send(cid, body);
    input.focus();
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  input.addEventListener('keydown', (e) => {
    // Enter sends, Shift+Enter is a new line; not while an IME composes.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  input.addEventListener('input', () => {
    autoGrow();
    if (state.openId && input.value.trim()) sync.typing(state.openId);
  });
  function autoGrow() {
    input.style.height = 'auto';
    input.style.height = Math.min(input.scrollHeight, 160) + 'px';
  }

  scroller.addEventListener('scroll', () => {
    stickToBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 60;
    if (scroller.scrollTop < 150) loadOlder();
  });

  async function loadOlder() {
    const c = state.conv(state.openId);
    if (!c || !c.hasOlder || c.loadingOlder) return;
    older.textContent = 'Loading earlier messages…';
    await sync.loadOlder(c.id);
  }

  /** One message row; update() refreshes the parts that can change. */
  function messageNode(m) {
    const body = h('div', { class: 'bubble' }, h('span', { class: 'body', 'data-testid': 'message-body' }, m.body));
    const sender = h('div', { class: 'sender' });
    const time = h('time', null);
    const stateEl = h('span', { class: 'receipt', 'data-testid': 'receipt' });
    const retry = h(
      'button',
      { class: 'retry', type: 'button', 'data-testid': 'retry', onclick: () => sync.retry(state.openId, m.clientMsgId) },
      icon('retry'),
      'Retry',
    );
    const meta = h('div', { class: 'meta' }, time, stateEl, retry);
    const el = h('div', { class: 'msg', 'data-testid': 'message', 'data-client-msg-id': m.clientMsgId }, sender, body, meta);
    const update = (d) => {
      el.classList.toggle('mine', d.mine);
      el.classList.toggle('theirs', !d.mine);
      el.classList.toggle('run-start', d.runStart);
      el.classList.toggle('failed', d.status === 'failed');
      el.classList.toggle('pending', d.status === 'sending');
      el.dataset.status = d.status;
      if (d.seq) el.dataset.seq = String(d.seq);
      else delete el.dataset.seq;
      setText(sender, d.senderLabel);
      sender.hidden = !d.senderLabel;
      setText(time, d.runEnd ? clockTime(d.createdAt) : '');
      time.hidden = !d.runEnd;
      setText(stateEl, d.receipt);
      stateEl.hidden = !d.receipt;
      retry.hidden = d.status !== 'failed';
      meta.hidden = !d.runEnd && !d.receipt && d.status !== 'failed';
      el.title = d.error || '';
    };
    return { el, update };
  }

  /** A system entry: a centred notice ("Ann renamed the group"). */
  function systemNode() {
    const text = h('span', null);
    const el = h('div', { class: 'system', role: 'note', 'data-testid': 'system' }, text);
    return {
      el,
      update: (d) => {
        setText(text, d.text);
        el.dataset.seq = String(d.seq);
      },
    };
  }

  function dayNode(label) {
    const el = h('div', { class: 'day', role: 'separator' }, h('span', null, label));
    return { el, update: () => {} };
  }

  /** The rows to show, in order, with everything that affects rendering. */
  function rows(c) {
    const out = [];
    const group = c.type === 'GROUP';
    const lastOwn = c.lastOwnSeq();
    let prevDay = '', prevSender = null;
    const push = (key, kind, d) => out.push({ key, kind, d });
    const addDay = (iso) => {
      const label = dayLabel(iso);
      if (label && label !== prevDay) {
        push(`day:${label}`, 'day', label);
        prevDay = label;
        prevSender = null;
      }
    };
    for (const m of c.visible()) {
      addDay(m.createdAt);
      if (m.kind === 'system') {
        push(`sys:${m.seq}`, 'system', { seq: m.seq, text: systemText(m, state.me) });
        prevSender = null;
        continue;
      }
      const mine = m.senderId === state.me;
      let receipt = '';
      if (mine && m.seq === lastOwn) {
        const s = c.seen && c.seen.seq === m.seq ? c.seen : null;
        if (s && s.seenBy > 0) receipt = group ? `Seen by ${s.seenBy}` : 'Seen';
        else receipt = 'Sent';
      }
      push(m.clientMsgId ? `m:${m.clientMsgId}` : `seq:${m.seq}`, 'msg', {
        m,
        mine,
        seq: m.seq,
        status: 'sent',
        receipt,
        createdAt: m.createdAt,
        runStart: prevSender !== m.senderId,
        senderLabel: group && !mine && prevSender !== m.senderId ? userName(m.senderId, state.me) : '',
      });
      prevSender = m.senderId;
    }
    for (const p of c.pendingList()) {
      addDay(p.createdAt);
      push(`m:${p.clientMsgId}`, 'msg', {
        m: { clientMsgId: p.clientMsgId, body: p.body },
        mine: true,
        seq: null,
        status: p.status === 'failed' ? 'failed' : 'sending',
        receipt: p.status === 'failed' ? 'Not sent' : 'Sending…',
        error: p.error,
        createdAt: p.createdAt,
        runStart: prevSender !== state.me,
        senderLabel: '',
      });
      prevSender = state.me;
    }
    // The time goes under the last message of a run: same sender, same
    // day, less than five minutes apart.
    for (let i = 0; i < out.length; i++) {
      const r = out[i];
      if (r.kind !== 'msg') continue;
      const next = out[i + 1];
      r.d.runEnd =
        !next ||
        next.kind !== 'msg' ||
        next.d.mine !== r.d.mine ||
        next.d.m.senderId !== r.d.m.senderId ||
        Math.abs(new Date(next.d.createdAt) - new Date(r.d.createdAt)) > 5 * 60000;
    }
    return out;
  }

  function renderMessages(c) {
    // Remember the first row on screen, to keep it still when older
    // messages are inserted above it (.messages is the offsetParent).
    let anchor = null, anchorTop = 0;
    if (!stickToBottom) {
      for (const child of list.children) {
        // Day separators are keyed by label and move; messages do not.
        if (child.classList.contains('msg') && child.offsetTop + child.offsetHeight > scroller.scrollTop) {
          anchor = child;
          anchorTop = child.offsetTop - scroller.scrollTop;
          break;
        }
      }
    }
    const want = rows(c);
    const next = new Map();
    want.forEach((r, i) => {
      let n = nodes.get(r.key);
      if (!n) n = r.kind === 'day' ? dayNode(r.d) : r.kind === 'system' ? systemNode() : messageNode(r.d.m);
      n.update(r.d);
      next.set(r.key, n);
      const at = list.children[i];
      if (at !== n.el) list.insertBefore(n.el, at || null);
    });
    for (const [k, n] of nodes) if (!next.has(k)) n.el.remove();
    nodes = next;

    if (c.hasOlder) older.textContent = c.loadingOlder ? 'Loading earlier messages…' : '';
    else older.textContent = c.loaded ? 'This is the beginning of the conversation.' : 'Loading…';

    const focus = c.focusSeq && list.querySelector(`[data-seq="${c.focusSeq}"]`);
    if (focus) {
      // A search hit: in the middle of the screen, marked for a moment.
      c.focusSeq = 0;
      stickToBottom = false;
      focus.classList.add('hit');
      setTimeout(() => focus.classList.remove('hit'), 2500);
      scroller.scrollTop = Math.max(0, focus.offsetTop - scroller.clientHeight / 2);
    } else if (stickToBottom) scroller.scrollTop = scroller.scrollHeight;
    else if (anchor && anchor.isConnected) scroller.scrollTop = anchor.offsetTop - anchorTop;
    // A first page shorter than the screen cannot be scrolled up: load on.
    if (c.hasOlder && !c.loadingOlder && scroller.scrollHeight <= scroller.clientHeight + 150) loadOlder();
  }

  function render() {
    const c = state.conv(state.openId);
    if (!c) return;
    if (shownId !== c.id) {
      // A different conversation: start from a clean list at the bottom.
      shownId = c.id;
      nodes = new Map();
      list.replaceChildren();
      stickToBottom = true;
      input.value = '';
      autoGrow();
      el.dataset.convId = String(c.id);
    }
    setText(titleEl, conversationTitle(c));
    avatarSlot.replaceChildren(avatar(c));
    const typing = c.typingUsers(Date.now());
    setText(typingEl, typingText(typing, state.me));
    let sub;
    if (c.type === 'DIRECT') sub = 'Direct message';
    else sub = c.members ? `${c.members.length} members` : 'Group';
    setText(subtitleEl, sub);
    const role = c.myRole();
    addBtn.hidden = !(c.type === 'GROUP' && (role === 'owner' || role === 'admin'));
    renderMessages(c);
  }

  function focus() {
    // Not on touch screens: the keyboard would cover the messages.
    if (window.matchMedia('(min-width: 700px)').matches) input.focus();
  }

  return { el, render, focus };
}
