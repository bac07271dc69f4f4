// Web Push for the web client: the permission is asked on a click, never
// on load (browsers penalise sites that ask unprompted); the service
// worker (static/sw.js) is subscribed with the server's VAPID key and the
// subscription registered as a device (POST /v1/devices). chatd pushes
// only what no session of the user acknowledged, so an open, visible
// page gets nothing; the service worker shows the notification and opens
// the conversation on click.

import { h, icon } from './views/dom.js';
import { conversationTitle } from './views/format.js';
import { countTitle, forgetShown, noteShown, removeMessages, replaceText, shownAlready } from './notification.js';

const deviceKey = (uid) => `chatd.pushDevice.${uid}`;

// Every read and show of the notifications runs one after the other: this
// page's in order, and across the page and the service worker (which
// shows pushes in the same origin's one list) under the Web Lock
// NOTIFICATIONS_LOCK, which static/sw.js takes too. Chromium's
// getNotifications() deletes from its database each stored notification
// the platform does not yet report on screen, so a read made while a
// showNotification is under way, in this page or in the worker, loses
// that notification for good: it stays on screen where no later read (a
// recall's, an edit's, a sign-out's) can find and close it.
const NOTIFICATIONS_LOCK = 'chatd-notifications';
let notifying = Promise.resolve();
function serially(fn) {
  const turn = navigator.locks ? () => navigator.locks.request(NOTIFICATIONS_LOCK, fn) : fn;
  const run = notifying.then(turn);
  notifying = run.catch(() => {});
  return run;
}

export function pushSupported() {
  return 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
}

function b64urlBytes(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

function sameKey(a, b64) {
  if (!a) return false;
  const x = new Uint8Array(a);
  const y = b64urlBytes(b64);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

// The Apis (one per sign-in) whose user was signed out: disablePush's
// (true: the browser's subscription goes too) or forgetDevice's (false).
const signedOut = new WeakMap();

/**
 * Subscribes this browser and registers it as uid's device. The user
 * signed out meanwhile (the permission prompt waits for the person at the
 * browser for as long as they like), nothing of it stays: what sign-out
 * would have removed, had it been there, is removed.
 */
export async function enablePush(api, uid) {
  let sub = null;
  const stillIn = async (id) => {
    if (!signedOut.has(api)) return;
    if (id !== undefined) api.request('DELETE', `/v1/devices/${id}`).catch(() => {});
    if (signedOut.get(api) && sub) await sub.unsubscribe().catch(() => {});
    throw new Error('Signed out.');
  };
  const perm = await Notification.requestPermission();
  await stillIn();
  if (perm !== 'granted') {
    throw new Error(perm === 'denied' ? 'Notifications are blocked for this site in the browser settings.' : 'Notifications were not allowed.');
  }
  const reg = await navigator.serviceWorker.register('/sw.js');
  await navigator.serviceWorker.ready;
  const { publicKey } = await api.request('GET', '/v1/push/vapid');
  await stillIn();
  sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub.options && sub.options.applicationServerKey, publicKey)) {
    await sub.unsubscribe(); // made for another server key: it could never be pushed to
    sub = null;
  }
  if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64urlBytes(publicKey) });
  await stillIn();
  const j = sub.toJSON();
  // Registering a device again updates it (the same id): a repeat is harmless.
  const { id } = await api.request(
    'POST',
    '/v1/devices',
    { platform: 'webpush', endpoint: j.endpoint, keys: { p256dh: j.keys.p256dh, auth: j.keys.auth }, locale: navigator.language || '' },
    {},
    { idempotent: true },
  );
  await stillIn(id);
  localStorage.setItem(deviceKey(uid), String(id));
  return id;
}

/**
 * Forgets this browser's device on sign-out: chatd is asked to delete it
 * (best effort), and the browser's subscription is dropped, so that the
 * next person at this browser gets none of the user's pushes even when the
 * delete cannot reach chatd (offline): pushed to a subscription that is
 * gone, the push service answers 410 and chatd forgets the device.
 */
export function disablePush(api, uid) {
  forgetDevice(api, uid);
  signedOut.set(api, true);
  if (!pushSupported()) return;
  navigator.serviceWorker
    .getRegistration()
    .then((reg) => reg && reg.pushManager.getSubscription())
    .then((sub) => sub && sub.unsubscribe())
    .catch(() => {});
}

/**
 * Deletes uid's device of this browser (best effort), keeping the
 * browser's subscription: another user signed in at this browser (in
 * another tab) uses it now, and must not get uid's pushes through it.
 */
export function forgetDevice(api, uid) {
  if (!signedOut.has(api)) signedOut.set(api, false);
  const id = localStorage.getItem(deviceKey(uid));
  if (!id) return;
  localStorage.removeItem(deviceKey(uid));
  api.request('DELETE', `/v1/devices/${id}`).catch(() => {});
}

// Who is signed in at this browser, for the service worker (static/sw.js
// reads the same entry; it has no localStorage): a push for another user
// (one who signed out, delivered late or through the subscription kept for
// the user signed in next) is not shown.
const SIGNED_IN_CACHE = 'chatd-signed-in';
const SIGNED_IN_KEY = '/chatd-signed-in';

/** Tells the service worker that userId (null: no one) is signed in at this browser. */
export async function rememberSignIn(userId) {
  if (!globalThis.caches) return;
  const c = await caches.open(SIGNED_IN_CACHE);
  await c.put(SIGNED_IN_KEY, new Response(JSON.stringify({ userId }), { headers: { 'Content-Type': 'application/json' } }));
}

/**
 * Signing in as userId: what was shown to anyone else at this browser is
 * forgotten (forgetShown), theirs to keep only while they are signed in
 * here; one who did not sign out (a token that expired while the browser
 * was closed) left it behind. Under the lock the worker notes what it
 * shows under, so a push of theirs it showed meanwhile leaves nothing.
 */
export function forgetOthersShown(userId) {
  return serially(() => forgetShown(globalThis.caches, userId));
}

/**
 * Signing out: the notifications shown for the user leave the screen,
 * those this page is still showing too (it waits for them), and the
 * service worker shows none of theirs from then on: next is who is
 * signed in now (null: no one). What was shown is forgotten too
 * (forgetShown), but next's. Told before the notifications are read
 * under the lock the worker takes too, so a push it shows after that read
 * is one it knows not to show.
 */
export async function clearNotifications(next = null) {
  if (!('serviceWorker' in navigator)) return;
  await rememberSignIn(next).catch(() => {});
  return serially(async () => {
    const reg = await navigator.serviceWorker.getRegistration();
    if (!reg) return;
    for (const n of await reg.getNotifications()) n.close();
    await forgetShown(globalThis.caches, next);
  });
}

/**
 * The "Enable notifications" button, or null where the browser has no
 * Web Push. With the permission already granted it re-registers quietly
 * (a browser may have rotated its subscription) and shows the state.
 */
export function pushButton(api, uid, notify) {
  if (!pushSupported()) return null;
  const label = h('span', null, 'Enable notifications');
  const btn = h('button', { class: 'btn push-btn', type: 'button', 'data-testid': 'enable-notifications' }, icon('bell'), label);
  const on = () => {
    label.textContent = 'Notifications on';
    btn.disabled = true;
    btn.dataset.state = 'on';
  };
  btn.onclick = async () => {
    btn.disabled = true;
    try {
      await enablePush(api, uid);
      on();
      notify('Notifications are on: new messages reach you while this page is hidden or closed.');
    } catch (e) {
      btn.disabled = false;
      notify(e.message || 'Notifications could not be turned on.');
    }
  };
  if (Notification.permission === 'denied') {
    label.textContent = 'Notifications blocked';
    btn.disabled = true;
  } else if (Notification.permission === 'granted' && localStorage.getItem(deviceKey(uid))) {
    on();
    enablePush(api, uid).catch(() => {});
  }
  return btn;
}

/**
 * Opens the conversation a clicked notification of user uid is for; a
 * click on another user's (one signed in before at this browser) is
 * ignored. Returns the function that stops following (at sign-out).
 */
export function followNotificationClicks(go, uid) {
  if (!('serviceWorker' in navigator)) return () => {};
  const onMessage = (e) => {
    const d = e.data || {};
    if (d.type !== 'open' || !Number.isSafeInteger(d.conversationId) || d.conversationId <= 0) return;
    if (d.userId !== undefined && d.userId !== uid) return;
    go(d.conversationId);
  };
  navigator.serviceWorker.addEventListener('message', onMessage);
  return () => navigator.serviceWorker.removeEventListener('message', onMessage);
}

/** How long the page goes by the block list it asked for (ms). */
const BLOCKS_FOR = 10000;

/**
 * How old a message may be when it reaches the hidden page and still
 * notify (ms). One older was not delivered live but caught up (replayed
 * after a reconnect, a laptop waking after hours): no session
 * acknowledged it within push_delay (seconds), so chatd pushed it, one
 * notification per conversation, or another session of the user had it
 * in time.
 */
const LIVE_FOR = 30000;

/** The history page asked for the times of a large group's replayed messages (chatd's cap). */
const HISTORY_PAGE = 200;

function muted(s) {
  return Boolean(s && s.muted && (!s.mutedUntil || Date.parse(s.mutedUntil) > Date.now()));
}

/**
 * Whether message ev stays silent for user uid in conversation c as
 * chatd's push decides it (internal/push wakesSQL): the conversation is
 * muted, unless it is a group whose mentions still notify (the default)
 * and the text mentions the user ("@<user id>" after anything but an
 * ASCII letter, digit or underscore, and before anything but a digit:
 * chatd's rule, ASCII so that it does not depend on its database's
 * locale, docs/http.md).
 */
function silenced(c, ev, uid) {
  if (!c || !muted(c.settings)) return false;
  if (c.type !== 'GROUP' || c.settings.mentions === false || typeof ev.body !== 'string') return true;
  return !new RegExp(`(^|[^A-Za-z0-9_])@${uid}([^0-9]|$)`).test(ev.body);
}

/**
 * While the page is hidden its MQTT session stays up and acknowledges, so
 * chatd sends no push: the page shows the notification itself, through the
 * service worker so that a click opens the conversation the same way. For
 * the same reason no remove push follows when such a message is recalled:
 * the page takes it out of the notification itself (closeRecalled), and
 * takes the notification away once the user has read the message
 * (read.updated), here or on another device: chatd sends nothing for a
 * read. Events are
 * handled one after the other (serially), so a recall never overtakes the
 * showing of its message. It notifies what chatd would push: not a
 * muted conversation's messages (a mention in a group excepted), nor
 * those of someone the user blocked (api asks whom). And only news: not
 * a message a replay after a reconnect brings again, nor one read
 * meanwhile, nor one caught up rather than live (LIVE_FOR, by chatd's
 * clock: api.serverNow): hours of messages replayed when a laptop wakes
 * alert nothing here, chatd pushed them. A large group's message.new
 * carries no time: history tells it (one page for a whole replay) until
 * one of the conversation's comes live on the connection; the ones after
 * it are live too. Nor while another page of the user's at this browser
 * (a tab, a window) is on screen: the user is in the app there, as when
 * this page is (onScreenElsewhere). Returns the function that stops it
 * telling the user's other pages when this one is on screen (signing
 * out).
 */
export function notifyWhileHidden(session, state, uid, api) {
  if (!pushSupported()) return () => {};
  const unhold = holdWhileVisible(visibleLock(uid));
  // A page whose connection stopped for good (MqttSession.stopRefused)
  // gets no messages: on screen, it must not keep the user's hidden
  // pages from alerting for it.
  session.addEventListener('refused', unhold);
  // Whom the user blocked: chatd never pushes their messages, in a group
  // either, where they still reach this page. Asked when a notification
  // is due (a block made on another device is not announced), and kept
  // for BLOCKS_FOR so that a burst asks once. Not known (chatd not
  // answering), the message notifies: it is on the page anyway.
  let blocks = null; // {at, ids: Promise<Set<number>>}
  const blocked = async (sender) => {
    if (!api) return false;
    if (!blocks || Date.now() - blocks.at > BLOCKS_FOR) {
      const ids = api.blocks().then((r) => new Set((r.blocked || []).map((b) => b.userId)));
      const mine = { at: Date.now(), ids };
      blocks = mine;
      ids.catch(() => blocks === mine && (blocks = null));
    }
    try {
      return (await blocks.ids).has(sender);
    } catch {
      return false;
    }
  };
  // Conversation id -> the highest seq of a message.new this page had: a
  // replay after a reconnect may bring again what it had (chatd keeps
  // sessions' positions in batches). The user's member.removed moves it to
  // its seq: what the leave still owes comes after it, of a conversation
  // no longer theirs (a re-add's messages come after that seq).
  const had = new Map();
  // Conversation id -> the seq from which its large-group (slim)
  // messages are live on this connection: history showed that one live,
  // and a conversation's entries come in seq order, a replay first.
  // Forgotten when the connection goes: the next one replays again.
  const liveFrom = new Map();
  session.addEventListener('status', (e) => e.detail !== 'online' && liveFrom.clear());
  session.addEventListener('event', (e) => {
    const ev = e.detail;
    if (ev.type === 'message.recalled') serially(() => closeRecalled(ev)).catch(() => {});
    else if (ev.type === 'message.edited') serially(() => showEdited(ev)).catch(() => {});
    else if (ev.type === 'read.updated' && ev.userId === uid) serially(() => closeRead(ev, uid)).catch(() => {});
    else if (ev.type === 'member.removed' && ev.userId === uid && ev.seq > 0) had.set(ev.conversationId, Math.max(had.get(ev.conversationId) ?? 0, ev.seq));
    else if (ev.type === 'message.new') {
      if (ev.seq <= (had.get(ev.conversationId) ?? 0)) return;
      had.set(ev.conversationId, ev.seq);
      serially(() => show(ev)).catch(() => {});
    }
  });
  // A conversation no longer the user's (removed, left on another device,
  // gone from the inbox): what its notifications show is not theirs to
  // read any more, and a click would open a conversation they cannot.
  state.addEventListener?.('removed', (e) => serially(() => closeConversation(e.detail, uid)).catch(() => {}));

  // Conversation id -> seq -> createdAt of the last history page asked
  // for a slim message's time: one page answers a whole replay.
  const times = new Map();
  /** When slim message ev was sent, as history tells; null: not known (chatd not answering). */
  async function sentAt(ev) {
    const cid = ev.conversationId;
    if (!times.get(cid)?.has(ev.seq)) {
      try {
        // The page from ev on (api.history drops an afterSeq of 0: from seq
        // 1 it is the page below HISTORY_PAGE + 1).
        const q = ev.seq > 1 ? { afterSeq: ev.seq - 1 } : { beforeSeq: HISTORY_PAGE + 1 };
        const page = await api.history(cid, { ...q, limit: HISTORY_PAGE });
        times.set(cid, new Map(page.map((m) => [m.seq, m.createdAt])));
      } catch {
        return null;
      }
    }
    return times.get(cid).get(ev.seq) ?? null;
  }

  /**
   * Whether message ev came too late to be news (LIVE_FOR). A large
   * group's (slim) carries no time: history tells it, until one of its
   * conversation is live on this connection (liveFrom). Not known, it
   * is news: it is on the page anyway.
   */
  async function caughtUp(ev) {
    const slim = ev.createdAt === undefined;
    if (slim && (!api?.history || liveFrom.get(ev.conversationId) <= ev.seq)) return false;
    const at = Date.parse((slim ? await sentAt(ev) : ev.createdAt) ?? '');
    if (!Number.isFinite(at)) return false;
    const now = api?.serverNow ? api.serverNow() : Date.now();
    if (now - at > LIVE_FOR) return true;
    if (slim) liveFrom.set(ev.conversationId, ev.seq);
    return false;
  }

  async function show(ev) {
    if (ev.senderId === uid || ev.recalled) return;
    if (Notification.permission !== 'granted' || !localStorage.getItem(deviceKey(uid))) return;
    // Read meanwhile (on another device), or the page is on screen: asked
    // again after every wait below, which may last as long as a request.
    const stale = () => {
      const c = state.conv(ev.conversationId);
      return document.visibilityState !== 'hidden' || Boolean(c && ev.seq <= (c.lastReadSeq || 0));
    };
    if (stale()) return;
    const c = state.conv(ev.conversationId);
    // Muted, caught up rather than live, or the sender blocked: the
    // blocks (a request) are asked for news only.
    if (silenced(c, ev, uid) || (await caughtUp(ev)) || stale() || (await blocked(ev.senderId))) return;
    const reg = await navigator.serviceWorker.getRegistration();
    if (!reg || stale()) return;
    // Another tab or window of the user's is on screen: they are in the
    // app, where the message is, as when this page is (stale).
    if (await onScreenElsewhere(uid)) return;
    // A push showed it (or a newer one) while this page's connection was
    // down, or this page before a reload did: the user was alerted.
    if (await shownAlready(reg, `conv-${ev.conversationId}`, uid, ev.seq, globalThis.caches)) return;
    const unread = Math.max(c ? c.unread : 1, 1);
    const text = typeof ev.body === 'string' && ev.body !== '';
    const title = c ? conversationTitle(c) : countTitle(unread);
    await reg.showNotification(title, {
      body: text ? ev.body : countTitle(unread),
      tag: `conv-${ev.conversationId}`,
      renotify: true,
      icon: '/favicon.svg',
      // count, title: as a push's (src/sw.js), what a recall of one of
      // its messages shows it again with (closeRecalled); after: it stands
      // for the unread messages after that seq, up to seq. edit: the
      // edit its text is of, 0 as sent, as a push's; a message edited
      // before its event was encoded (a replay, a relay that lagged)
      // carries that edit's text and time, not its seq: editedAt, which
      // orders the edits' events that follow (replaceText) until the
      // one of that text tells its seq. Without either, an update push
      // of an older edit would put its text back.
      data: {
        userId: uid,
        conversationId: ev.conversationId,
        seq: ev.seq,
        text,
        ...(text && ev.editedAt ? { editedAt: ev.editedAt } : { edit: 0 }),
        count: unread,
        title,
        after: c?.lastReadSeq || 0,
        url: `/#/c/${ev.conversationId}`,
      },
    });
    await noteShown(globalThis.caches, `conv-${ev.conversationId}`, uid, ev.seq);
  }

  return unhold;
}

// The Web Lock (shared) each page of user uid holds while it is visible
// (holdWhileVisible), so that their hidden pages know one is on screen.
const visibleLock = (uid) => `chatd-visible-${uid}`;

/**
 * Holds the shared Web Lock name while this page is visible, until the
 * function it returns is called (signing out). Without Web Locks it
 * holds nothing.
 */
function holdWhileVisible(name) {
  const locks = navigator.locks;
  if (!locks) return () => {};
  const doc = document;
  let release = null;
  let stopped = false;
  const update = () => {
    const visible = !stopped && doc.visibilityState === 'visible';
    if (visible && !release) {
      const held = new Promise((r) => (release = r));
      locks.request(name, { mode: 'shared' }, () => held).catch(() => {});
    } else if (!visible && release) {
      release();
      release = null;
    }
  };
  doc.addEventListener('visibilitychange', update);
  update();
  return () => {
    stopped = true;
    update();
    doc.removeEventListener('visibilitychange', update);
  };
}

/**
 * Whether another page where user uid is signed in at this browser is on
 * screen (it holds visibleLock(uid)): the service worker leaves a push to
 * a page on screen, and a hidden page leaves its alert to it the same
 * way: the user is in the app, where the message shows. Not known (no
 * Web Locks), it is not.
 */
async function onScreenElsewhere(uid) {
  try {
    const snapshot = navigator.locks?.query ? await navigator.locks.query() : null;
    return Boolean(snapshot?.held?.some((l) => l.name === visibleLock(uid)));
  } catch {
    return false;
  }
}

/**
 * Shows the edited text in the notification that shows the message's text
 * (src/notification.js replaceText, as an update push does; the edit's
 * seq orders it with the update pushes' editSeq, its editedAt with the
 * edited text a message.new showed). An edit
 * marked bodyHidden (of a message from before our join) says nothing of
 * the text.
 */
async function showEdited(ev) {
  if (typeof ev.body !== 'string' || ev.bodyHidden) return;
  const reg = await navigator.serviceWorker.getRegistration();
  if (!reg) return;
  for (const n of await reg.getNotifications({ tag: `conv-${ev.conversationId}` })) await replaceText(reg, n, ev.targetSeq, ev.body, ev.seq, ev.editedAt);
}

/**
 * Closes conversation cid's notifications (this page's or a push's) whose
 * data (userId, seq) which() picks.
 */
async function closeWhere(cid, which) {
  const reg = await navigator.serviceWorker.getRegistration();
  if (!reg) return;
  for (const n of await reg.getNotifications({ tag: `conv-${cid}` })) if (which(n.data || {})) n.close();
}

/** Whether notification data d is user uid's (a push that names no user counts as theirs). */
const usersOwn = (d, uid) => d.userId === undefined || d.userId === uid;

/**
 * Closes the conversation's notification once user uid has read the
 * message it stands for, on this page or on another device: it is no
 * longer news.
 */
function closeRead(ev, uid) {
  return closeWhere(ev.conversationId, (d) => usersOwn(d, uid) && Number.isInteger(d.seq) && d.seq <= ev.seq);
}

/** Closes conversation cid's notification of user uid. */
function closeConversation(cid, uid) {
  return closeWhere(cid, (d) => usersOwn(d, uid));
}

/**
 * Takes the recalled message out of the conversation's notification that
 * stands for it (src/notification.js, as a remove push does): the page's
 * own stand for the unread messages it counted (after, up to seq), a
 * push's (whose messages the page does not know) for its newest.
 */
async function closeRecalled(ev) {
  const reg = await navigator.serviceWorker.getRegistration();
  if (!reg) return;
  const has = (d) => ev.targetSeq <= d.seq && ev.targetSeq > (Number.isInteger(d.after) ? d.after : d.seq - 1);
  for (const n of await reg.getNotifications({ tag: `conv-${ev.conversationId}` })) if (has(n.data || {})) await removeMessages(reg, n, [ev.targetSeq]);
}
