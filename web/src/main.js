// Entry point: sign-in, then the two-pane app (inbox | conversation; one
// pane at a time below 700px). Routing is the URL hash (#/c/<id>) so the
// back button and reloads work without server-side routes.

import { Api } from './api.js';
import { TabClientIds, callAt, clearSignIn, loadSignIn, watchSignIn } from './auth.js';
import { MqttSession } from './mqtt-session.js';
import { ChatState } from './store/state.js';
import { Sync } from './store/sync.js';
import { Outbox } from './store/outbox.js';
import { h, icon, replace } from './views/dom.js';
import { signInView } from './views/signin.js';
import { createInbox } from './views/inbox.js';
import { createConversationView } from './views/conversation.js';
import { openDialog, parseUserId, parseUserIds } from './views/dialogs.js';
import { leaveConversation } from './views/lifecycle.js';
import { People } from './store/people.js';
import { useBlobs, usePeople } from './views/format.js';
import { createSearch } from './views/search.js';
import { openInfo, openProfile } from './views/people.js';
import { BlobCache, UploadTickets, Uploader } from './uploads.js';
import { clearNotifications, disablePush, followNotificationClicks, forgetDevice, forgetOthersShown, notifyWhileHidden, pushButton, rememberSignIn } from './push.js';

const root = document.getElementById('app');
const dev = document.body.dataset.dev === 'true';
const clientIds = new TabClientIds(); // for sign-out/in in one tab

function boot(notice) {
  const s = loadSignIn();
  if (s) startApp(s);
  else replace(root, signInView({ dev, notice, onSignedIn: (x) => startApp(x) }));
}

async function startApp({ token, userId, exp }) {
  const clientId = await clientIds.claim(userId);
  const outbox = new Outbox(clientId);
  // What this user's closed tabs left unsent goes out from this page.
  await outbox.adoptOrphans();
  // Opened by a click on a notification (static/sw.js): its conversation
  // only if the notification is this user's.
  const forUser = new URLSearchParams(location.search).get('for');
  if (forUser !== null) history.replaceState(null, '', location.pathname + (forUser === String(userId) ? location.hash : ''));
  // The service worker shows this user's pushes only (static/sw.js), and
  // what it and the page showed to others here goes.
  rememberSignIn(userId)
    .then(() => forgetOthersShown(userId))
    .catch(() => {});
  // The tray's uploads someone else left here are not theirs to resume.
  UploadTickets.forgetOthers(userId);
  const state = new ChatState(userId);
  // CONNACK 0x85: another user's session holds this tab's client id. The
  // tab claims a new one as it claimed the first (no other tab has it),
  // and what waits unsent under the old one moves to it; the old one's
  // lock goes once its outbox is empty, and no later page picks it.
  const renewClientId = (refused) => clientIds.renew(userId, refused, (id) => outbox.moveTo(id));
  const forgetClientId = (refused) => clientIds.forget(userId, refused);
  const session = new MqttSession({ userId, token, clientId, renewClientId, forgetClientId });
  let ended = false;
  // forced: the token expired or was refused. The user is gone from this
  // browser as after signing out, unless another tab signed in meanwhile
  // (it uses the browser's push subscription now). Another user signed
  // in, this user's device goes all the same: their pushes must not
  // reach the other user's screen (signed out in another tab, that tab
  // deleted it; one being registered here is not kept either).
  const signOut = (notice, { endSession = false, forced = false } = {}) => {
    if (ended) return;
    ended = true;
    const current = loadSignIn();
    if (endSession || (forced && (!current || current.token === token))) {
      // The next person at this browser gets neither the pushes nor the
      // notifications already on screen.
      disablePush(api, userId);
      clearNotifications(current && current.token !== token ? current.userId : null).catch(() => {});
    } else if (!current || current.userId !== userId) forgetDevice(api, userId);
    stopExpiryTimer();
    unwatch();
    unfollow();
    stopNotifying();
    // Panels, dialogs, menus and the photo viewer open on top of the app
    // (beside it in <body>) leave with it: signed out by another tab or an
    // expired token, the sign-in page must not show them.
    leaveConversation();
    for (const el of [...document.body.children]) if (el !== root) el.remove();
    session.close({ endSession });
    clientIds.release(userId, session.clientId);
    // Signing out: this person's unsent messages, those of their other
    // tabs too, and the uploads their tray left unfinished do not stay in
    // the browser. An expired token keeps them for the next sign-in.
    if (endSession) {
      Outbox.clearUser(userId);
      UploadTickets.clearUser(userId);
    }
    sync.stop(); // nothing is on screen: no more read receipts nor catch-up
    // The user's files shown from blob: URLs (and the tray's previews)
    // must not outlive the sign-out in this page.
    convView.dispose();
    media.cache.clear();
    // Only our own token: another tab may have signed someone else in.
    if (current?.token === token) clearSignIn();
    window.removeEventListener('hashchange', route);
    history.replaceState(null, '', location.pathname);
    document.title = 'chatd';
    boot(notice);
  };
  // Signed out in another tab (or signed in there as someone else): no
  // tab of this browser keeps showing or receiving the conversations.
  const unwatch = watchSignIn((now) => {
    if (!now || now.userId !== userId) signOut('You were signed out in another tab.');
  });
  // Signing out just before the token expires beats a burst of 401s.
  const stopExpiryTimer = callAt(exp, () => signOut('Your session expired. Sign in again.', { forced: true }));
  const api = new Api(token, () => signOut('Your session expired or the token was rejected. Sign in again.', { forced: true }));
  session.addEventListener('unauthorized', () => signOut('The server rejected your token. Sign in again.', { forced: true }));
  // Refused every client id: the token is good, so the user stays; the
  // sidebar says the page is not connected.
  session.addEventListener('refused', () => notify('Not connected: the server refused the client ids of this page. Reload the page to try again.'));
  const sync = new Sync(state, api, session);
  sync.outbox = outbox;
  const people = new People(api, userId);
  usePeople(people);
  sync.people = people;
  people.addEventListener('change', () => state.changed('people'));
  people.loadMe().catch(() => {});

  const toast = h('div', { class: 'toast', role: 'status', 'data-testid': 'toast', hidden: true });
  let toastTimer = 0;
  const notify = (msg) => {
    toast.textContent = msg;
    toast.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => (toast.hidden = true), 6000);
  };
  sync.onError = notify;
  sync.onRemoved = () => {
    notify('You are no longer a member of that conversation.');
    location.hash = '';
  };

  const go = (cid) => {
    location.hash = cid ? `#/c/${cid}` : '';
  };
  const signOutEverywhere = () => signOut('You were signed out on every device. Sign in again.', { endSession: true });
  const media = { uploader: new Uploader(api, { userId }), cache: new BlobCache(api) };
  useBlobs(media.cache);
  sync.onRecalled = (ids) => media.cache.forget(ids);
  const peopleCtx = { state, sync, api, people, media, notify, go, signOutEverywhere };
  const search = createSearch(state, api, {
    jump: (cid, seq) => {
      go(cid);
      sync.jumpTo(cid, seq).then((found) => found === false && notify('That message is no longer there.'));
    },
  }, session);

  const inbox = createInbox(state, {
    open: go,
    search,
    profile: () => openProfile(peopleCtx),
    signOut: () => signOut('', { endSession: true }),
    newDirect: () =>
      openDialog({
        title: 'New direct chat',
        submit: 'Open chat',
        fields: [{ name: 'peer', label: 'User id', type: 'number', placeholder: 'e.g. 2' }],
        run: async ({ peer }, req) => {
          const id = parseUserId(peer);
          if (id === userId) throw new Error('That is you. Pick someone else.');
          go(await sync.openDirect(id, req));
        },
      }),
    newGroup: () =>
      openDialog({
        title: 'New group',
        submit: 'Create group',
        fields: [
          { name: 'title', label: 'Name', placeholder: 'e.g. Weekend trip' },
          { name: 'members', label: 'Members', placeholder: 'User ids, e.g. 2, 3', hint: 'You are added as the owner.' },
        ],
        run: async ({ title, members }, req) => {
          if (!title) throw new Error('Give the group a name.');
          go(await sync.createGroup(title, parseUserIds(members), req));
        },
      }),
  });

  const convView = createConversationView(state, sync, media, {
    back: () => go(null),
    info: (cid) => openInfo(peopleCtx, cid),
    notify,
    addMember: (cid) =>
      openDialog({
        bound: true,
        title: 'Add member',
        submit: 'Add',
        fields: [{ name: 'user', label: 'User id', type: 'number', placeholder: 'e.g. 4' }],
        run: async ({ user }, req) => {
          await sync.addMember(cid, parseUserId(user), req);
          notify(`User ${user} was added.`);
        },
      }),
  });

  const bell = pushButton(api, userId, notify);
  if (bell) inbox.el.querySelector('.sidebar-actions').after(h('div', { class: 'sidebar-push' }, bell));
  const unfollow = followNotificationClicks(go, userId);
  const stopNotifying = notifyWhileHidden(session, state, userId, api);

  const emptyPane = h(
    'section',
    { class: 'chat-empty', 'data-testid': 'no-conversation' },
    h('span', { class: 'empty-mark' }, icon('chat')),
    h('h2', null, 'Your messages'),
    h('p', null, 'Pick a conversation, or start a new one.'),
  );
  const mainPane = h('div', { class: 'main-pane' });
  const app = h('div', { class: 'app', 'data-testid': 'app' }, inbox.el, mainPane, toast);
  replace(root, app);

  let scheduled = false;
  const render = () => {
    scheduled = false;
    if (ended) return;
    inbox.render();
    const open = state.openId && state.conv(state.openId);
    app.classList.toggle('show-chat', Boolean(state.openId));
    const pane = open ? convView.el : emptyPane;
    if (mainPane.firstChild !== pane) mainPane.replaceChildren(pane);
    // Not open: it closes what was open about the conversation left.
    convView.render();
    let unread = 0;
    for (const c of state.conversations.values()) unread += c.unread;
    document.title = unread ? `(${unread}) chatd` : 'chatd';
  };
  state.addEventListener('change', () => {
    if (scheduled) return;
    scheduled = true;
    // rAF pauses in hidden tabs; the timeout keeps the title and badges
    // current there.
    requestAnimationFrame(() => scheduled && render());
    setTimeout(() => scheduled && render(), 100);
  });

  function route() {
    const m = /^#\/c\/([1-9][0-9]{0,15})$/.exec(location.hash);
    const cid = m ? Number(m[1]) : null;
    if (cid === state.openId) return;
    if (cid) {
      sync.open(cid).then(() => convView.focus());
    } else sync.close();
  }
  window.addEventListener('hashchange', route);
  sync.start();
  route();
  render();
}

boot('');
