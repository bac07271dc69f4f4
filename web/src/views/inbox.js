// The sidebar: who you are, the connection state, and the inbox with
// unread badges. A row is kept, by conversation id, while what it shows
// stays the same, and built anew when any of it changed: a burst of
// messages in a large inbox rebuilds the rows written to, not every row,
// each frame, and a row compared whole cannot keep a stale badge.

import { h, icon } from './dom.js';
import { avatar, avatarKey, conversationTitle, displayName, msgTypeLabel, personAvatar, personAvatarKey, shortTime, systemText, typingText, userName } from './format.js';

const STATUS_TEXT = { online: 'Online', connecting: 'Connecting…', offline: 'Offline, reconnecting…', refused: 'Not connected: reload the page' };

/**
 * @param {import('../store/state.js').ChatState} state
 * @param {{open:(id:number)=>void, newDirect:()=>void, newGroup:()=>void, signOut:()=>void,
 *   profile:()=>void, search:{el:HTMLElement}}} actions
 */
export function createInbox(state, actions) {
  const status = h('span', { class: 'status', 'data-testid': 'connection' });
  // A load of the inbox waiting to be retried (chatd busy) says so.
  const wait = h('p', { class: 'inbox-wait hint', role: 'status', 'data-testid': 'inbox-wait', hidden: true });
  const list = h('ul', { class: 'conv-list', 'data-testid': 'inbox', 'aria-label': 'Conversations' });
  const empty = h(
    'div',
    { class: 'inbox-empty' },
    h('p', null, 'No conversations yet.'),
    h('p', { class: 'hint' }, 'Start a direct chat or create a group.'),
  );

  const meAvatar = h('span', { class: 'avatar-slot' });
  const meName = h('strong', { 'data-testid': 'me' }, `User ${state.me}`);
  const el = h(
    'aside',
    { class: 'sidebar' },
    h(
      'header',
      { class: 'sidebar-head' },
      h('button', { class: 'me-btn', type: 'button', title: 'Profile and settings', 'data-testid': 'profile', onclick: actions.profile }, meAvatar,
        h('span', { class: 'me' }, meName, status)),
      h('button', { class: 'icon-btn', type: 'button', title: 'Profile and settings', 'aria-label': 'Profile and settings', 'data-testid': 'settings', onclick: actions.profile }, icon('settings')),
      h('button', { class: 'icon-btn', type: 'button', title: 'Sign out', 'aria-label': 'Sign out', onclick: actions.signOut }, icon('logout')),
    ),
    actions.search.el,
    h(
      'div',
      { class: 'sidebar-actions' },
      h('button', { class: 'btn', type: 'button', 'data-testid': 'new-direct', onclick: actions.newDirect }, icon('person'), 'New chat'),
      h('button', { class: 'btn', type: 'button', 'data-testid': 'new-group', onclick: actions.newGroup }, icon('group'), 'New group'),
    ),
    h('div', { class: 'conv-scroll' }, wait, list, empty),
  );

  /**
   * What c's row shows, as plain data: rows of equal models are equal.
   * preview: [class, text] parts, a part of class '' plain text.
   */
  function rowModel(c) {
    const typing = c.typingUsers(Date.now());
    let preview;
    if (typing.length) {
      preview = [['typing', c.type === 'DIRECT' ? 'typing…' : typingText(typing, state.me)]];
    } else if (c.lastMessage) {
      const m = c.lastMessage;
      if (m.kind === 'system') {
        preview = [['muted', systemText(m, state.me)]];
      } else {
        const who = m.senderId === state.me ? 'You: ' : c.type === 'GROUP' ? `${userName(m.senderId, state.me)}: ` : '';
        preview = [who && ['who', who], m.recalled ? ['muted deleted', 'Message deleted'] : ['', m.body || msgTypeLabel(m.msgType)]].filter(Boolean);
      }
    } else {
      preview = [['muted', c.lastSeq ? 'New messages' : 'No messages yet']];
    }
    return {
      open: state.openId === c.id,
      unread: c.unread,
      avatar: avatarKey(c),
      title: conversationTitle(c),
      preview,
      time: shortTime(c.lastMessageAt || c.createdAt),
    };
  }

  /** The row's button, as model m of conversation c tells. */
  function rowButton(c, m) {
    return h(
      'button',
      {
        type: 'button',
        class: `conv-row${m.open ? ' active' : ''}${m.unread ? ' has-unread' : ''}`,
        'data-testid': 'conv-row',
        'data-conv-id': c.id,
        'aria-current': m.open ? 'true' : null,
      },
      avatar(c),
      h(
        'span',
        { class: 'conv-main' },
        h('span', { class: 'conv-title', 'data-testid': 'conv-title' }, m.title),
        h('span', { class: 'conv-preview' }, m.preview.map(([cls, text]) => (cls ? h('span', { class: cls }, text) : text))),
      ),
      h(
        'span',
        { class: 'conv-meta' },
        h('time', { class: 'conv-time' }, m.time),
        m.unread ? h('span', { class: 'badge', 'data-testid': 'unread', 'aria-label': `${m.unread} unread` }, m.unread > 99 ? '99+' : String(m.unread)) : null,
      ),
    );
  }

  // A click opens the conversation whose row it is on (delegated: a row
  // is rebuilt when what it shows changes). A message arriving between
  // press and release rebuilds the row under the pointer, and the browser then
  // sends no click to either element: a release on the new row of the
  // conversation that was pressed is that click.
  const rowOf = (target) => target.closest?.('[data-testid=conv-row]');
  let pressed = null; // {el, id} of the row the primary button went down on
  list.addEventListener('pointerdown', (e) => {
    const el = e.button === 0 ? rowOf(e.target) : null;
    pressed = el ? { el, id: Number(el.dataset.convId) } : null;
  });
  list.addEventListener('pointerup', (e) => {
    const el = e.button === 0 ? rowOf(e.target) : null;
    const p = pressed;
    pressed = null;
    if (el && p && el !== p.el && !p.el.isConnected && Number(el.dataset.convId) === p.id) actions.open(p.id);
  });
  list.addEventListener('click', (e) => {
    const el = rowOf(e.target);
    if (el) actions.open(Number(el.dataset.convId));
  });

  /** @type {Map<number, {li: HTMLElement, btn: HTMLElement, key: string}>} conversation id -> its row */
  let rows = new Map();
  let meKey = '';

  function render() {
    meName.textContent = displayName(state.me);
    const mk = personAvatarKey(state.me);
    if (mk !== meKey) {
      meKey = mk;
      meAvatar.replaceChildren(personAvatar(state.me));
    }
    status.textContent = STATUS_TEXT[state.connection] || state.connection;
    status.dataset.state = state.connection;
    const convs = state.sortedConversations();
    // A row rebuilt or moved may lose the focus: a keyboard user keeps
    // their place on the same conversation's row.
    let focusedId = null;
    for (const [id, r] of rows) if (r.btn === document.activeElement) focusedId = id;
    const next = new Map();
    let at = list.firstChild; // where the next row belongs
    for (const c of convs) {
      const model = rowModel(c);
      const key = JSON.stringify(model);
      let r = rows.get(c.id);
      if (!r) r = { li: h('li'), btn: null, key: '' };
      if (r.key !== key) {
        r.key = key;
        r.btn = rowButton(c, model);
        r.li.replaceChildren(r.btn);
      }
      next.set(c.id, r);
      // Rows in order stay where they are; one that moved up goes
      // before them.
      if (r.li === at) at = at.nextSibling;
      else list.insertBefore(r.li, at);
    }
    for (const [id, r] of rows) if (!next.has(id)) r.li.remove();
    rows = next;
    const focused = rows.get(focusedId)?.btn;
    if (focused && document.activeElement !== focused) focused.focus({ preventScroll: true });
    empty.hidden = !state.inboxLoaded || convs.length > 0;
    wait.textContent = state.waits.get('inbox') || '';
    wait.hidden = !wait.textContent;
  }

  return { el, render };
}
