// The sidebar: who you are, the connection state, and the inbox with
// unread badges. Rebuilt on every inbox-level change: it is small, and a
// full rebuild cannot leave a stale badge behind.

import { h, icon, replace } from './dom.js';
import { avatar, conversationTitle, displayName, msgTypeLabel, personAvatar, shortTime, systemText, typingText, userName } from './format.js';

const STATUS_TEXT = { online: 'Online', connecting: 'Connecting…', offline: 'Offline, reconnecting…' };

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

  function row(c) {
    const now = Date.now();
    const typing = c.typingUsers(now);
    let preview;
    if (typing.length) {
      preview = h('span', { class: 'typing' }, c.type === 'DIRECT' ? 'typing…' : typingText(typing, state.me));
    } else if (c.lastMessage) {
      const m = c.lastMessage;
      if (m.kind === 'system') {
        preview = h('span', { class: 'muted' }, systemText(m, state.me));
      } else {
      const who = m.senderId === state.me ? 'You: ' : c.type === 'GROUP' ? `${userName(m.senderId, state.me)}: ` : '';
      preview = [who && h('span', { class: 'who' }, who), m.recalled ? h('span', { class: 'muted deleted' }, 'Message deleted') : m.body || msgTypeLabel(m.msgType)];
      }
    } else {
      preview = h('span', { class: 'muted' }, c.lastSeq ? 'New messages' : 'No messages yet');
    }
    const unread = c.unread;
    return h(
      'li',
      null,
      h(
        'button',
        {
          type: 'button',
          class: `conv-row${state.openId === c.id ? ' active' : ''}${unread ? ' has-unread' : ''}`,
          'data-testid': 'conv-row',
          'data-conv-id': c.id,
          'aria-current': state.openId === c.id ? 'true' : null,
        },
        avatar(c),
        h(
          'span',
          { class: 'conv-main' },
          h('span', { class: 'conv-title', 'data-testid': 'conv-title' }, conversationTitle(c)),
          h('span', { class: 'conv-preview' }, preview),
        ),
        h(
          'span',
          { class: 'conv-meta' },
          h('time', { class: 'conv-time' }, shortTime(c.lastMessageAt || c.createdAt)),
          unread ? h('span', { class: 'badge', 'data-testid': 'unread', 'aria-label': `${unread} unread` }, unread > 99 ? '99+' : String(unread)) : null,
        ),
      ),
    );
  }

  // A click opens the conversation whose row it is on (delegated: the
  // rows are rebuilt on every change). A message arriving between press
  // and release rebuilds the row under the pointer, and the browser then
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

  function render() {
    meName.textContent = displayName(state.me);
    meAvatar.replaceChildren(personAvatar(state.me));
    status.textContent = STATUS_TEXT[state.connection] || state.connection;
    status.dataset.state = state.connection;
    const convs = state.sortedConversations();
    // The rebuild replaces the focused row too: a keyboard user keeps
    // their place on the same conversation's new row.
    const focused = rowOf(document.activeElement ?? list);
    const focusedId = focused && list.contains(focused) ? focused.dataset.convId : null;
    replace(list, convs.map(row));
    if (focusedId !== null) list.querySelector(`[data-testid=conv-row][data-conv-id="${focusedId}"]`)?.focus({ preventScroll: true });
    empty.hidden = !state.inboxLoaded || convs.length > 0;
    wait.textContent = state.waits.get('inbox') || '';
    wait.hidden = !wait.textContent;
  }

  return { el, render };
}
