// Unit tests of src/push.js: the notifications the page shows itself
// while it is hidden (its MQTT session acknowledges, so chatd pushes
// nothing: the page must notify as chatd's push would). Plain Node with
// stand-ins for the browser's service worker registration, Notification,
// localStorage and document. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clearNotifications, disablePush, enablePush, forgetOthersShown, notifyWhileHidden } from '../src/push.js';
import { noteShown, replaceText } from '../src/notification.js';
import { ChatState } from '../src/store/state.js';
import { Sync } from '../src/store/sync.js';

const ME = 1;

/** The browser of a user who turned notifications on, its page hidden. */
function hiddenPage() {
  const shown = [];
  const reg = {
    async showNotification(title, opts) {
      shown.push({ title, ...opts });
    },
    // The notifications on screen: the last shown of each tag, unless closed.
    async getNotifications({ tag } = {}) {
      const last = new Map();
      for (const n of shown) last.set(n.tag, n);
      const on = [...last.values()].filter((n) => !closed.has(n) && (!tag || n.tag === tag));
      for (const n of on) n.close = () => closed.add(n);
      return on;
    },
  };
  const closed = new Set();
  const saved = { navigator: globalThis.navigator, window: globalThis.window, document: globalThis.document, localStorage: globalThis.localStorage };
  const had = { Notification: 'Notification' in globalThis, PushManager: 'PushManager' in globalThis };
  Object.defineProperty(globalThis, 'navigator', { value: { serviceWorker: { getRegistration: async () => reg } }, configurable: true, writable: true });
  globalThis.window = globalThis;
  globalThis.PushManager = class {};
  globalThis.Notification = { permission: 'granted' };
  globalThis.document = Object.assign(new EventTarget(), { visibilityState: 'hidden' });
  const store = new Map([[`chatd.pushDevice.${ME}`, '7']]);
  globalThis.localStorage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, String(v)), removeItem: (k) => store.delete(k) };
  const undo = () => {
    Object.defineProperty(globalThis, 'navigator', { value: saved.navigator, configurable: true, writable: true });
    for (const k of ['window', 'document', 'localStorage']) {
      if (saved[k] === undefined) delete globalThis[k];
      else globalThis[k] = saved[k];
    }
    if (!had.Notification) delete globalThis.Notification;
    if (!had.PushManager) delete globalThis.PushManager;
  };
  return { shown, onScreen: () => reg.getNotifications(), undo };
}

/** A group conversation as the store holds it, muted with mentions on (chatd's default). */
function mutedGroup(id) {
  return {
    id,
    type: 'GROUP',
    title: 'Team',
    unread: 1,
    settings: { muted: true, mutedUntil: null, mentions: true },
    peerId: () => null,
  };
}

/**
 * Cache Storage over a Map, as the page and the service worker share it,
 * put in globalThis.caches (the test deletes it): its entries by cache
 * name and key.
 */
function memoryCaches() {
  const entries = new Map();
  globalThis.caches = {
    async open(name) {
      return {
        async put(k, res) {
          entries.set(name + k, await res.text());
        },
        async match(k) {
          return entries.has(name + k) ? new Response(entries.get(name + k)) : undefined;
        },
        async keys() {
          return [...entries.keys()].filter((k) => k.startsWith(name + '/')).map((k) => new Request(new URL(k.slice(name.length), 'http://chatd.test/')));
        },
        async delete(r) {
          return entries.delete(name + (typeof r === 'string' ? r : new URL(r.url).pathname));
        },
      };
    },
    async delete(name) {
      for (const k of [...entries.keys()]) if (k.startsWith(name + '/')) entries.delete(k);
      return true;
    },
  };
  return entries;
}

/**
 * Web Locks of one origin, as its pages and the service worker share
 * them: an exclusive request waits for the one before it of its name, a
 * shared one is granted at once (none here shares a name with an
 * exclusive one); query tells what is held.
 */
function memoryLocks() {
  const held = [];
  const tails = new Map();
  return {
    async request(name, opts, fn) {
      if (typeof opts === 'function') [fn, opts] = [opts, {}];
      const mode = opts.mode || 'exclusive';
      const before = (mode === 'exclusive' && tails.get(name)) || Promise.resolve();
      let done;
      const mine = new Promise((r) => (done = r));
      if (mode === 'exclusive') tails.set(name, before.then(() => mine));
      await before;
      const lock = { name, mode };
      held.push(lock);
      try {
        return await fn(lock);
      } finally {
        held.splice(held.indexOf(lock), 1);
        done();
      }
    },
    async query() {
      return { held: held.map((l) => ({ ...l })), pending: [] };
    },
  };
}

/** Runs the page's serialised notification work. */
const settle = () => new Promise((r) => setTimeout(r, 20));

/** Group id as mutedGroup makes it, but with no settings (so not muted) and none of it read. */
const unreadGroup = (id) => ({ ...mutedGroup(id), settings: null, lastReadSeq: 0 });

/**
 * A session whose events the hidden page notifies of, for the
 * conversations store holds: send gives it one event, deliver a
 * message.new of member 2 in conversation 5.
 */
function notifying(store, api, session = new EventTarget()) {
  notifyWhileHidden(session, store, ME, api);
  const send = (detail) => session.dispatchEvent(new CustomEvent('event', { detail }));
  const deliver = (seq, body, createdAt) => send({ type: 'message.new', conversationId: 5, seq, senderId: 2, body, createdAt });
  return { session, send, deliver };
}

test('a message that mentions the user in a group they muted still notifies while the page is hidden, as chatd pushes it', async () => {
  const page = hiddenPage();
  try {
    const convs = new Map([[5, mutedGroup(5)]]);
    const { send, deliver } = notifying({ conv: (id) => convs.get(id) });
    deliver(1, 'lunch at noon');
    deliver(2, 'and @12 brings the cake');
    deliver(3, 'email@1.example'); // not a mention: a letter before the @
    deliver(4, '@1 can you come?');
    await settle();
    assert.deepEqual(
      page.shown.map((n) => n.body),
      ['@1 can you come?'],
      'a mention in a muted group (mentions on) must notify, and nothing else of it',
    );
    // Mentions off: the mute silences everything.
    convs.get(5).settings.mentions = false;
    deliver(5, 'hey @1');
    await settle();
    assert.equal(page.shown.length, 1, 'a muted group with mentions off notified');
    // A direct conversation that is muted notifies nothing, mentions or not.
    convs.set(6, { ...mutedGroup(6), type: 'DIRECT', peerId: () => 2 });
    send({ type: 'message.new', conversationId: 6, seq: 1, senderId: 2, body: '@1 hi' });
    await settle();
    assert.equal(page.shown.length, 1, 'a muted direct conversation notified a mention');
  } finally {
    page.undo();
  }
});

test('a mention after a character outside ASCII notifies as chatd pushes it, whatever the locale of its database', async () => {
  const page = hiddenPage();
  try {
    const { deliver } = notifying({ conv: () => mutedGroup(5) });
    // A mention is "@<user id>" after anything but an ASCII letter, digit
    // or underscore, and before anything but a digit (docs/http.md).
    deliver(1, 'café@1 tonight?');
    deliver(2, 'Привет,@1');
    deliver(3, 'x_@1'); // inside a word: not one
    deliver(4, '@1');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['café@1 tonight?', 'Привет,@1', '@1']);
  } finally {
    page.undo();
  }
});

test('a message of someone the user blocked does not notify while the page is hidden, in a group either, as chatd pushes none', async () => {
  const page = hiddenPage();
  try {
    const group = { ...mutedGroup(5), settings: null };
    const calls = [];
    const api = {
      async blocks() {
        calls.push('GET /v1/me/blocks');
        return { blocked: [{ userId: 3, createdAt: '2026-01-01T00:00:00Z' }] };
      },
    };
    const { send } = notifying({ conv: () => group }, api);
    const deliver = (seq, senderId, body) => send({ type: 'message.new', conversationId: 5, seq, senderId, body });
    deliver(1, 3, 'you will regret it');
    deliver(2, 2, 'lunch at noon');
    deliver(3, 3, 'answer me');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['lunch at noon'], 'a blocked sender\'s message was shown in a notification');
    assert.equal(calls.length, 1, `a burst asked for the blocks more than once: ${calls}`);
  } finally {
    page.undo();
  }
});

test('notifications turned on while the user signs out (the permission prompt still open) register no device for them', async () => {
  const page = hiddenPage();
  try {
    let allow;
    globalThis.Notification = { permission: 'default', requestPermission: () => new Promise((r) => (allow = r)) };
    const browserSub = {
      options: { applicationServerKey: new Uint8Array([1, 2, 3]).buffer },
      unsubscribed: false,
      toJSON: () => ({ endpoint: 'https://push.example/s1', keys: { p256dh: 'p', auth: 'a' } }),
      async unsubscribe() {
        this.unsubscribed = true;
        subscribed = null;
        return true;
      },
    };
    let subscribed = null;
    const reg = {
      pushManager: {
        getSubscription: async () => subscribed,
        subscribe: async () => (subscribed = browserSub),
      },
    };
    navigator.serviceWorker.register = async () => reg;
    navigator.serviceWorker.ready = Promise.resolve(reg);
    navigator.serviceWorker.getRegistration = async () => reg;
    localStorage.removeItem(`chatd.pushDevice.${ME}`);
    const calls = [];
    const api = {
      async request(method, path) {
        calls.push(`${method} ${path}`);
        if (path === '/v1/push/vapid') return { publicKey: 'AQID' };
        if (path === '/v1/devices') return { id: 9 };
        return null;
      },
    };
    const enabling = enablePush(api, ME).then(
      () => 'enabled',
      (e) => e,
    );
    await settle();
    disablePush(api, ME); // the user signs out meanwhile
    allow('granted'); // then allows notifications
    await enabling;
    await settle();
    const registered = calls.filter((c) => c === 'POST /v1/devices').length;
    const deleted = calls.filter((c) => c === 'DELETE /v1/devices/9').length;
    assert.ok(registered === deleted, `a device was registered for the signed-out user and left: ${calls}`);
    assert.equal(localStorage.getItem(`chatd.pushDevice.${ME}`), null, 'the signed-out user\'s device is remembered at this browser');
    assert.equal(subscribed, null, 'the browser stays subscribed for the signed-out user');
  } finally {
    page.undo();
  }
});

test('messages replayed after a reconnect notify only when they are new: not hours-old ones caught up (chatd pushed those), nor one the page had or the user read', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    const { deliver } = notifying({ conv: () => group });
    const ago = (ms) => new Date(Date.now() - ms).toISOString();
    deliver(1, 'live', ago(200));
    await settle();
    // The laptop slept for hours: its session's replay brings what came
    // meanwhile (chatd pushed it then), and one it had already (a cursor
    // not yet flushed when chatd restarted).
    deliver(1, 'live', ago(200));
    deliver(2, 'three hours ago', ago(3 * 3600e3));
    deliver(3, 'two hours ago', ago(2 * 3600e3));
    // Read on another device meanwhile.
    group.lastReadSeq = 4;
    deliver(4, 'read elsewhere', ago(1000));
    deliver(5, 'just now', ago(500));
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['live', 'just now']);
  } finally {
    page.undo();
  }
});

test('a message a push showed while the page\'s connection was down, replayed when it comes back (still news by the clock), does not alert again; the next one does', async () => {
  const page = hiddenPage();
  try {
    const group = { ...mutedGroup(5), settings: null, lastReadSeq: 0 };
    const session = new EventTarget();
    notifyWhileHidden(session, { conv: () => group }, ME);
    // The service worker showed chatd's push of message 2 (no session
    // acknowledged it in time), as src/sw.js does.
    const reg = await navigator.serviceWorker.getRegistration();
    await reg.showNotification('Team', { body: 'pushed', tag: 'conv-5', renotify: true, data: { userId: ME, conversationId: 5, seq: 2, text: true, edit: 0, count: 2, title: 'Team' } });
    const deliver = (seq, body) =>
      session.dispatchEvent(new CustomEvent('event', { detail: { type: 'message.new', conversationId: 5, seq, senderId: 2, body, createdAt: new Date(Date.now() - 5000).toISOString() } }));
    deliver(1, 'first');
    deliver(2, 'pushed');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['pushed'], 'the replay alerted again for what the push showed');
    deliver(3, 'next');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['pushed', 'next']);
  } finally {
    page.undo();
  }
});

test('a message the page alerted for before a reload, whose notification the user dismissed, does not alert again when the reloaded page gets it again; the next one does', async () => {
  const page = hiddenPage();
  const entries = memoryCaches();
  try {
    const group = { ...mutedGroup(5), settings: null, lastReadSeq: 0 };
    const deliver = (session, seq, body) =>
      session.dispatchEvent(new CustomEvent('event', { detail: { type: 'message.new', conversationId: 5, seq, senderId: 2, body, createdAt: new Date(Date.now() - 5000).toISOString() } }));
    const before = new EventTarget();
    notifyWhileHidden(before, { conv: () => group }, ME);
    deliver(before, 2, 'seen');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['seen']);
    for (const n of await page.onScreen()) n.close(); // dismissed
    // Reloaded: a new page, whose connection's replay brings message 2 again.
    const after = new EventTarget();
    notifyWhileHidden(after, { conv: () => group }, ME);
    deliver(after, 2, 'seen');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['seen'], 'the reloaded page alerted again for what the user dismissed');
    deliver(after, 3, 'next');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['seen', 'next']);
  } finally {
    delete globalThis.caches;
    page.undo();
  }
});

test('signing out forgets which conversations notified and up to which message, as it closes their notifications', async () => {
  const page = hiddenPage();
  const entries = memoryCaches();
  try {
    const group = { ...mutedGroup(5), settings: null, lastReadSeq: 0 };
    const session = new EventTarget();
    notifyWhileHidden(session, { conv: () => group }, ME);
    session.dispatchEvent(new CustomEvent('event', { detail: { type: 'message.new', conversationId: 5, seq: 2, senderId: 2, body: 'hi', createdAt: new Date().toISOString() } }));
    await settle();
    assert.equal(page.shown.length, 1);
    assert.ok([...entries.keys()].some((k) => k.startsWith('chatd-shown/')), 'what was shown was not recorded');
    await clearNotifications(null);
    assert.deepEqual(await page.onScreen(), [], 'a notification stayed on screen after sign-out');
    assert.deepEqual([...entries.keys()].filter((k) => k.startsWith('chatd-shown/')), [], 'what was shown outlived the sign-out');
  } finally {
    delete globalThis.caches;
    page.undo();
  }
});

test('signing in forgets what was shown at this browser to anyone else (a user whose token expired while the browser was closed never signed out), and keeps what was shown to the user', async () => {
  const page = hiddenPage();
  const entries = memoryCaches();
  try {
    // User 8 was shown messages of conversations 5 and 9 here, the user
    // signing in message 4 of conversation 5 (before a reload).
    await noteShown(globalThis.caches, 'conv-5', 8, 3);
    await noteShown(globalThis.caches, 'conv-9', 8, 6);
    await noteShown(globalThis.caches, 'conv-5', ME, 4);
    await forgetOthersShown(ME);
    assert.deepEqual([...entries.keys()].filter((k) => k.includes('/8/')), [], 'what was shown to the user signed in before stayed');
    const group = unreadGroup(5);
    const { deliver } = notifying({ conv: () => group });
    deliver(4, 'again');
    deliver(5, 'next');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['next'], "the user's own record went too");
  } finally {
    delete globalThis.caches;
    page.undo();
  }
});

/**
 * Another tab of the user's at this browser, on screen, its session
 * session, showing group: a page of its own (other, its document), which
 * notifies nothing. stop is its notifyWhileHidden's stop.
 */
function otherTabOnScreen(session, group) {
  const hidden = globalThis.document;
  const other = Object.assign(new EventTarget(), { visibilityState: 'visible' });
  globalThis.document = other;
  const stop = notifyWhileHidden(session, { conv: () => group }, ME);
  globalThis.document = hidden;
  return { other, stop };
}

test("a hidden tab does not alert while another tab of the user's at this browser is on screen (they are in the app there), and does once none is", async () => {
  const page = hiddenPage();
  navigator.locks = memoryLocks();
  try {
    const group = unreadGroup(5);
    const { other, stop: stopOther } = otherTabOnScreen(new EventTarget(), group);
    const { deliver } = notifying({ conv: () => group });
    deliver(1, 'read there');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), [], 'the hidden tab alerted while the other was on screen');
    const show = (state) => {
      other.visibilityState = state;
      other.dispatchEvent(new Event('visibilitychange'));
    };
    show('hidden');
    deliver(2, 'both hidden');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['both hidden']);
    show('visible');
    deliver(3, 'on screen again');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['both hidden']);
    // Signed out there (the page stays on screen, at the sign-in form).
    stopOther();
    deliver(4, 'signed out there');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['both hidden', 'signed out there']);
  } finally {
    page.undo();
  }
});

test("a tab on screen whose connection the server refused for good (every client id) no longer keeps the user's hidden tabs from alerting: it gets no messages to show", async () => {
  const page = hiddenPage();
  navigator.locks = memoryLocks();
  try {
    const group = unreadGroup(5);
    const otherSession = new EventTarget();
    otherTabOnScreen(otherSession, group);
    const { deliver } = notifying({ conv: () => group });
    deliver(1, 'read there');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), []);
    // The tab on screen stops for good (MqttSession.stopRefused), and stays on screen.
    otherSession.dispatchEvent(new CustomEvent('status', { detail: 'refused' }));
    otherSession.dispatchEvent(new CustomEvent('refused', { detail: new Error('refused') }));
    deliver(2, 'not connected there');
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['not connected there'], 'the hidden tab stayed silent for a tab on screen that gets no messages');
  } finally {
    page.undo();
  }
});

test('a page whose clock is minutes off chatd\'s still notifies live messages, and not hours-old ones', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    const skew = 5 * 60e3; // this computer's clock is five minutes ahead
    const api = { serverNow: () => Date.now() - skew, blocks: async () => ({ blocked: [] }) };
    const { deliver } = notifying({ conv: () => group }, api);
    deliver(1, 'hours ago', new Date(Date.now() - skew - 3 * 3600e3).toISOString());
    deliver(2, 'live', new Date(Date.now() - skew).toISOString());
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['live']);
  } finally {
    page.undo();
  }
});

test('a notification showing a photo\'s caption drops it when the caption is cleared; an edit whose body is hidden from us leaves it', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    const { send } = notifying({ conv: () => group });
    send({ type: 'message.new', conversationId: 5, seq: 3, senderId: 2, body: 'the view', msgType: 'image', createdAt: new Date().toISOString() });
    await settle();
    // An edit of a message from before our join: its new text is not
    // ours, and its empty body says nothing of the caption.
    send({ type: 'message.edited', conversationId: 5, seq: 4, targetSeq: 3, senderId: 2, body: '', bodyHidden: true });
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['the view'], 'a hidden edit changes nothing');
    send({ type: 'message.edited', conversationId: 5, seq: 5, targetSeq: 3, senderId: 2, body: '' });
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), ['the view', 'New message'], 'the cleared caption is not left on the screen');
    assert.equal(page.shown[1].silent, true);
  } finally {
    page.undo();
  }
});

test('a notification the hidden page showed of a message edited before its event (a replay after a reconnect) keeps that text: the events of the edits before it, and a late update push of one, do not put theirs back', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    const { send } = notifying({ conv: () => group });
    // Sent, then edited twice within one millisecond (chatd writes
    // microseconds) while the page was away; its session's replay brings
    // the message as it is now, then both edits.
    const ms = new Date(Date.now() - 3000).toISOString().replace(/Z$/, '');
    const [first, second] = [`${ms}456Z`, `${ms}789Z`];
    send({ type: 'message.new', conversationId: 5, seq: 5, senderId: 2, body: 'see you at 11', createdAt: new Date(Date.now() - 4000).toISOString(), editedAt: second });
    send({ type: 'message.edited', conversationId: 5, seq: 6, targetSeq: 5, senderId: 2, body: 'see you at 10', editedAt: first });
    await settle();
    const [shown] = await page.onScreen();
    assert.equal(shown.body, 'see you at 11', 'the replayed event of an older edit put its text back');
    send({ type: 'message.edited', conversationId: 5, seq: 7, targetSeq: 5, senderId: 2, body: 'see you at 11', editedAt: second });
    await settle();
    let [n] = await page.onScreen();
    assert.deepEqual([n.body, n.data.edit], ['see you at 11', 7], 'the notification does not know the edit its text is of');
    // The first edit's update push, come late (push services keep no
    // order), as the service worker applies it (src/sw.js).
    const reg = await navigator.serviceWorker.getRegistration();
    await replaceText(reg, n, 5, 'see you at 10', 6);
    [n] = await page.onScreen();
    assert.equal(n.body, 'see you at 11', "an older edit's update push put its text back");
    // A newer edit's still shows.
    await replaceText(reg, n, 5, 'see you at 12', 8);
    [n] = await page.onScreen();
    assert.deepEqual([n.body, n.data.edit, n.silent], ['see you at 12', 8, true]);
    // A message as sent: its text is of no edit (0), as a push's is.
    send({ type: 'message.new', conversationId: 5, seq: 9, senderId: 2, body: 'and lunch?', createdAt: new Date().toISOString() });
    await settle();
    [n] = await page.onScreen();
    assert.deepEqual([n.body, n.data.edit], ['and lunch?', 0]);
  } finally {
    page.undo();
  }
});

test('a large group\'s messages (slim: no createdAt) replayed after a long absence do not notify, and live ones still do', async () => {
  const page = hiddenPage();
  const realNow = Date.now;
  try {
    const group = unreadGroup(5);
    const ago = (ms) => new Date(realNow() - ms).toISOString();
    // What history answers: the conversation's messages with their times.
    const history = [
      { seq: 1, kind: 'message', senderId: 2, createdAt: ago(5 * 3600e3) },
      { seq: 2, kind: 'message', senderId: 2, createdAt: ago(3 * 3600e3) },
      { seq: 3, kind: 'message', senderId: 3, createdAt: ago(2 * 3600e3) },
      { seq: 4, kind: 'message', senderId: 2, createdAt: ago(1000) },
    ];
    const asked = [];
    const api = {
      serverNow: () => Date.now(),
      blocks: async () => ({ blocked: [] }),
      async history(cid, q) {
        asked.push(q);
        const from = q.afterSeq ?? 0;
        const found = history.filter((m) => m.seq > from && (!q.beforeSeq || m.seq < q.beforeSeq));
        return q.beforeSeq ? found.slice(-q.limit) : found.slice(0, q.limit);
      },
    };
    const { session, send } = notifying({ conv: () => group }, api);
    const slim = (seq, senderId = 2) => send({ type: 'message.new', conversationId: 5, seq, senderId });
    // The laptop wakes after hours: the session comes back and replays
    // what the large group said meanwhile (chatd pushed it then).
    session.dispatchEvent(new CustomEvent('status', { detail: 'online' }));
    session.dispatchEvent(new CustomEvent('connected', { detail: { first: false, sessionPresent: true } }));
    slim(2);
    slim(3, 3);
    slim(4); // a second old: not pushed (acknowledged within push_delay), news
    await settle();
    assert.deepEqual(page.shown.map((n) => n.data.seq), [4], 'a large group\'s replayed messages notified (or its news did not)');
    assert.ok(asked.length <= 1, `the replay asked history once a message: ${JSON.stringify(asked)}`);
    // The replay is over: what comes next is live, and notifies without
    // asking history again.
    history.push({ seq: 5, kind: 'message', senderId: 2, createdAt: ago(0) });
    const before = asked.length;
    slim(5);
    await settle();
    assert.deepEqual(page.shown.map((n) => n.data.seq), [4, 5], 'a large group\'s live message did not notify');
    assert.equal(asked.length, before, 'a live message of a large group asked history');
  } finally {
    page.undo();
  }
});

test('a large group\'s backlog replayed slowly, long after the connection came back, does not notify either', async () => {
  const page = hiddenPage();
  const realNow = Date.now;
  try {
    const group = unreadGroup(5);
    const ago = (ms) => new Date(realNow() - ms).toISOString();
    const history = Array.from({ length: 400 }, (_, i) => ({ seq: i + 1, kind: 'message', senderId: 2, createdAt: ago((401 - i) * 60e3) }));
    const asked = [];
    const api = {
      serverNow: () => realNow(),
      blocks: async () => ({ blocked: [] }),
      async history(cid, q) {
        asked.push(q);
        const found = history.filter((m) => m.seq > (q.afterSeq ?? 0) && (!q.beforeSeq || m.seq < q.beforeSeq));
        return q.beforeSeq ? found.slice(-q.limit) : found.slice(0, q.limit);
      },
    };
    const { session, send } = notifying({ conv: () => group }, api);
    session.dispatchEvent(new CustomEvent('status', { detail: 'online' }));
    session.dispatchEvent(new CustomEvent('connected', { detail: { first: true, sessionPresent: true } }));
    // A day's backlog on a slow network: still coming a minute later.
    Date.now = () => realNow() + 60e3;
    for (let seq = 1; seq <= 400; seq++) send({ type: 'message.new', conversationId: 5, seq, senderId: 2 });
    await settle();
    assert.deepEqual(page.shown.map((n) => n.data.seq), [], 'a large group\'s replayed backlog notified');
    assert.equal(asked.length, 2, `history was not asked a page for many messages: ${JSON.stringify(asked)}`);
  } finally {
    Date.now = realNow;
    page.undo();
  }
});

test('messages caught up after a reconnect, which notify nothing, do not make the hidden page ask whom the user blocked', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    let asked = 0;
    const api = { serverNow: () => Date.now(), blocks: async () => (asked++, { blocked: [] }) };
    const { deliver } = notifying({ conv: () => group }, api);
    for (let seq = 1; seq <= 3; seq++) deliver(seq, `m${seq}`, new Date(Date.now() - (4 - seq) * 3600e3).toISOString());
    await settle();
    assert.equal(page.shown.length, 0);
    assert.equal(asked, 0, 'the blocks were asked for messages that notify nothing');
  } finally {
    page.undo();
  }
});

test('a message read on another device, or seen on the page shown again, while the page asks whom the user blocked does not notify', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    // A page whose request for the blocks is answered when the test says.
    const hidden = () => {
      let answer;
      const api = { blocks: () => new Promise((r) => (answer = () => r({ blocked: [] }))) };
      const { deliver } = notifying({ conv: () => group }, api);
      return { deliver, answer: () => answer() };
    };
    const a = hidden();
    a.deliver(1, 'read elsewhere');
    await settle();
    group.lastReadSeq = 1; // read.updated of the user's phone, while the blocks are asked for
    a.answer();
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), [], 'a message read while the blocks were asked for was notified');
    const b = hidden();
    b.deliver(2, 'on screen');
    await settle();
    globalThis.document.visibilityState = 'visible'; // the user came back to the page meanwhile
    b.answer();
    await settle();
    assert.deepEqual(page.shown.map((n) => n.body), [], 'a message was notified on a page the user was looking at');
  } finally {
    page.undo();
  }
});

test('a notification the hidden page showed goes when the user reads its message, here or on another device; not for a read short of it, nor for another member\'s', async () => {
  const page = hiddenPage();
  try {
    const group = unreadGroup(5);
    const { send } = notifying({ conv: () => group });
    const read = (userId, seq) => send({ type: 'read.updated', conversationId: 5, userId, seq, lastSeq: 3 });
    send({ type: 'message.new', conversationId: 5, seq: 3, senderId: 2, body: 'see you at 8' });
    await settle();
    assert.equal((await page.onScreen()).length, 1);
    read(2, 3); // another member read it
    read(ME, 2); // the user read what came before it
    await settle();
    assert.equal((await page.onScreen()).length, 1, 'a read short of the message, or another member\'s, closed its notification');
    read(ME, 3);
    await settle();
    assert.deepEqual((await page.onScreen()).map((n) => n.body), [], 'the notification of a message the user read stays on screen');
  } finally {
    page.undo();
  }
});

test('a recall of one of the messages a notification the hidden page showed stands for shows it again, silently, with the rest, as a remove push does; a recall of the last closes it', async () => {
  const page = hiddenPage();
  try {
    // Unread: 2 and 3; the user read 1.
    const group = { ...unreadGroup(5), lastReadSeq: 1, unread: 2 };
    const { send } = notifying({ conv: () => group });
    const recall = (seq, targetSeq) => send({ type: 'message.recalled', conversationId: 5, seq, targetSeq, actorId: 2 });
    const onScreen = async () => (await page.onScreen()).map((n) => [n.title, n.body, Boolean(n.silent)]);
    send({ type: 'message.new', conversationId: 5, seq: 3, senderId: 2, body: 'my pin is 4711' });
    await settle();
    assert.deepEqual(await onScreen(), [['Team', 'my pin is 4711', false]]);
    recall(4, 1); // read before the notification: not one of its messages
    await settle();
    assert.deepEqual(await onScreen(), [['Team', 'my pin is 4711', false]], 'a recall of a message read before changed the notification');
    recall(5, 3);
    await settle();
    assert.deepEqual(await onScreen(), [['Team', 'New message', true]], 'a recall of one of its two messages did not leave the other, without the recalled text');
    recall(5, 3); // the same recall again (a replay) counts once
    await settle();
    assert.deepEqual(await onScreen(), [['Team', 'New message', true]]);
    recall(6, 2);
    await settle();
    assert.deepEqual(await onScreen(), [], 'the notification of messages all recalled stayed');
  } finally {
    page.undo();
  }
});

test('the notifications the hidden page showed go when the user is removed from their group, leaves it on another device, or it is gone from their inbox; not for another member\'s removal', async () => {
  const page = hiddenPage();
  try {
    const entry = (id) => ({ id, type: 'GROUP', title: `Group ${id}`, lastSeq: 0, lastReadSeq: 0, unread: 0 });
    const members = [{ userId: ME, role: 'member', lastReadSeq: 0 }, { userId: 2, role: 'owner', lastReadSeq: 0 }];
    // After the reconnect the inbox no longer lists group 7: the user was
    // removed from it while this session missed the event.
    const api = { inbox: async () => [entry(8)], conversation: async (id) => ({ ...entry(id), members }) };
    const state = new ChatState(ME);
    state.setInbox([5, 6, 7, 8].map(entry));
    const session = new EventTarget();
    const sync = new Sync(state, api, session);
    const { send } = notifying(state, undefined, session);
    session.addEventListener('event', (e) => sync.onEvent(e.detail));
    for (const cid of [5, 6, 7, 8]) send({ type: 'message.new', conversationId: cid, seq: 1, senderId: 2, body: `hi ${cid}`, createdAt: new Date().toISOString() });
    await settle();
    assert.equal((await page.onScreen()).length, 4);
    send({ type: 'member.removed', conversationId: 5, userId: 3, actorId: 2, seq: 1 }); // another member
    await settle();
    assert.equal((await page.onScreen()).length, 4, 'another member\'s removal closed a notification');
    send({ type: 'member.removed', conversationId: 5, userId: ME, actorId: 2, seq: 1 }); // removed by the owner
    send({ type: 'member.removed', conversationId: 6, userId: ME, actorId: ME, seq: 1 }); // left on their phone
    await sync.refreshInbox();
    await settle();
    assert.deepEqual((await page.onScreen()).map((n) => n.body), ['hi 8'], 'a notification of a conversation no longer the user\'s stays on screen');
  } finally {
    page.undo();
  }
});

test('a message the leave still owed, coming after the user\'s member.removed, does not notify: the conversation is no longer theirs; one after a re-add does', async () => {
  const page = hiddenPage();
  try {
    const state = new ChatState(ME);
    state.setInbox([{ id: 5, type: 'GROUP', title: 'Group 5', lastSeq: 1, lastReadSeq: 1, unread: 0 }]);
    const session = new EventTarget();
    const sync = new Sync(state, { conversation: async () => ({}) }, session);
    const { send } = notifying(state, undefined, session);
    session.addEventListener('event', (e) => sync.onEvent(e.detail));
    // Seq 2 was written before the removal; chatd sends member.removed
    // first, then what had not reached the connection (docs/protocol.md).
    send({ type: 'member.removed', conversationId: 5, userId: ME, actorId: 2, seq: 2 });
    send({ type: 'message.new', conversationId: 5, seq: 2, senderId: 2, body: 'owed', createdAt: new Date().toISOString() });
    await settle();
    assert.deepEqual((await page.onScreen()).map((n) => n.body), [], 'a conversation no longer the user\'s notifies');
    // Added back (its member.added lost, or not yet applied): what comes
    // after the removal's seq notifies.
    send({ type: 'message.new', conversationId: 5, seq: 4, senderId: 2, body: 'back', createdAt: new Date().toISOString() });
    await settle();
    assert.deepEqual((await page.onScreen()).map((n) => n.body), ['back']);
  } finally {
    page.undo();
  }
});
