// Unit tests of Sync (src/store/sync.js) with a fake HTTP API and MQTT
// session: what it fetches, and when. Plain Node: no browser, no server.
// Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../src/api.js';
import { ChatState } from '../src/store/state.js';
import { Sync, changeFailedText } from '../src/store/sync.js';
import { Outbox } from '../src/store/outbox.js';
import { SendError } from '../src/mqtt-session.js';

globalThis.document ??= { visibilityState: 'visible' };

const ME = 1;
const at = (seq) => new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString();
const msg = (seq, senderId = 2) => ({ conversationId: 7, seq, kind: 'message', senderId, clientMsgId: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, body: `m${seq}`, createdAt: at(seq) });

/** The server: conversation 7, a direct chat with user 2 holding msgs; offline while down is true. */
function fakeApi(msgs) {
  const api = {
    down: false,
    calls: [],
    async request() {
      return null;
    },
    check(what) {
      api.calls.push(what);
      if (api.down) throw new ApiError(0, 'network', 'network error: Failed to fetch');
    },
    async inbox() {
      api.check('inbox');
      const last = msgs.at(-1);
      return [{ id: 7, type: 'DIRECT', peerId: 2, lastSeq: last.seq, lastReadSeq: 0, unread: msgs.length, lastMessage: last, lastMessageAt: last.createdAt }];
    },
    async conversation(cid) {
      api.check(`conversation ${cid}`);
      return { id: cid, type: 'DIRECT', lastSeq: msgs.at(-1).seq, members: [{ userId: ME, role: 'member', lastReadSeq: 0 }, { userId: 2, role: 'member', lastReadSeq: 0 }] };
    },
    async history(cid, q) {
      api.check(`history ${cid} ${JSON.stringify(q)}`);
      let out = msgs.filter((m) => (!q.afterSeq || m.seq > q.afterSeq) && (!q.beforeSeq || m.seq < q.beforeSeq));
      out = q.afterSeq ? out.slice(0, q.limit) : out.slice(-q.limit);
      return structuredClone(out);
    },
    async markRead(cid, seq) {
      api.check(`read ${cid} ${seq}`);
      return { lastReadSeq: seq };
    },
    async seen() {
      return { seenBy: 0, members: 2 };
    },
  };
  return api;
}

async function settle() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 5));
}

/** settle() for a test whose setTimeout is mocked: what the answers set off, without a timer. */
async function drain() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

test('a conversation that could not be opened (offline) loads once the connection is back: it does not stay "Loading…"', async () => {
  const { api, state, sync } = rig();
  const errors = [];
  sync.onError = (e) => errors.push(e);
  await sync.refreshInbox();
  await sync.refreshMembers(7); // held: the load that fails is the history's
  // The network is down as the user opens the chat (a phone waking up).
  api.down = true;
  await sync.open(7);
  assert.equal(state.openId, 7);
  assert.equal(state.conv(7).loaded, false);
  assert.equal(errors.length, 1, 'the failure is told');
  // Back online: MQTT reconnects and 'connected' resyncs.
  api.down = false;
  await sync.resync();
  await settle();
  const c = state.conv(7);
  assert.equal(c.loaded, true, 'the open conversation is still not loaded');
  assert.deepEqual(c.visible().map((m) => m.seq), [1, 2, 3]);
  assert.ok(api.calls.includes('read 7 3'), 'what is now shown is read');
  // A later reconnect does not load it again.
  const loads = () => api.calls.filter((x) => x === 'history 7 {"limit":50}').length;
  assert.equal(loads(), 2, 'the failed load and the one after the reconnect');
  await sync.resync();
  await settle();
  assert.equal(loads(), 2);
});

test('a read receipt that fails is not sent again at once, in a loop, but after the reconnect, though nothing new arrived', async () => {
  const { api, state, sync } = rig();
  await sync.refreshInbox();
  // The conversation loads, but its receipt fails (offline: fetch fails
  // at once; or 429, 5xx). Past 50 tries the fake stops failing, so that
  // a client that retries in a loop ends.
  const markRead = api.markRead;
  let failed = 0;
  api.markRead = async (cid, seq) => {
    if (failed >= 50) return markRead(cid, seq);
    failed++;
    throw new ApiError(0, 'network', 'network error: Failed to fetch');
  };
  await sync.open(7);
  await settle();
  assert.equal(state.conv(7).loaded, true);
  assert.equal(failed, 1, 'the failed receipt was sent again at once');
  // Back online: MQTT reconnects and 'connected' resyncs.
  api.markRead = markRead;
  await sync.resync();
  await settle();
  assert.ok(api.calls.includes('read 7 3'), `no receipt after the reconnect: ${api.calls}`);
  assert.equal(state.conv(7).lastReadSeq, 3);
});

test('opening a conversation whose catch-up failed (a 503) fetches what it lacks: the message the inbox shows is there', async () => {
  const { msgs, api, state, sync } = rig();
  await sync.refreshInbox();
  await sync.open(7);
  await settle();
  sync.close();
  // While the user is elsewhere, #4 and #5 come with no event (a
  // reconnect after the session expired); the catch-up answers 503 once.
  msgs.push(msg(4), msg(5));
  const history = api.history;
  api.history = async (cid, q) => {
    api.history = history;
    throw new ApiError(503, 'unavailable', 'database unavailable');
  };
  await sync.resync();
  await settle();
  const c = state.conv(7);
  assert.equal(c.lastMessage.seq, 5, 'the inbox shows #5');
  assert.equal(c.have, 3);
  await sync.open(7);
  await settle();
  assert.deepEqual(c.visible().map((m) => m.seq), [1, 2, 3, 4, 5]);
});

test('a catch-up that fails (a 503) is tried again, backing off, while connected: the gap does not wait for the next message', async () => {
  // #4 is lost on the way (a non-persistent session's overflow); #5
  // arrives live and shows the gap, whose catch-up answers 503 twice.
  let failures = 0;
  const { c } = await gapCaughtUp((history, cid, q) => {
    if (failures < 2) {
      failures++;
      throw new ApiError(503, 'unavailable', 'database unavailable');
    }
    return history(cid, q);
  });
  assert.equal(failures, 2);
  assert.deepEqual(c.visible().map((m) => m.seq), [1, 2, 3, 4, 5], 'the gap stayed on screen after the catch-up failed');
});

/**
 * The rig with conversation 7 open (messages 1-3; catch-up backing off
 * from 10 ms) when #5 arrives live after #4 was lost on the way: the
 * gap's catch-up calls answer(history, cid, q) in place of api.history.
 * Resolves once the gap is filled, with the rig and the conversation.
 */
async function gapCaughtUp(answer) {
  const r = rig();
  r.sync.retryBaseMs = 10;
  await r.sync.refreshInbox();
  await r.sync.open(7);
  await settle();
  r.msgs.push(msg(4), msg(5));
  const history = r.api.history;
  r.api.history = async (cid, q) => answer(history, cid, q);
  r.sync.onEvent({ type: 'message.new', ...msg(5) });
  const c = r.state.conv(7);
  await until(() => c.have === 5, 'the gap is filled');
  return { ...r, c };
}

/** A Sync over fakeApi(msgs) (conversation 7 with messages 1-3 by default) and its state. */
function rig(msgs = [msg(1), msg(2), msg(3)]) {
  const api = fakeApi(msgs);
  const state = new ChatState(ME);
  return { msgs, api, state, sync: new Sync(state, api, new EventTarget()) };
}

/** Makes api.inbox's next answer wait: returns the function that gives it. */
function holdInbox(api) {
  let answer;
  const next = api.inbox;
  api.inbox = () => {
    api.inbox = next;
    return new Promise((resolve) => (answer = resolve));
  };
  return (entries) => answer(entries);
}

const group = (id, title) => ({ id, type: 'GROUP', title, lastSeq: 0, lastReadSeq: 0, unread: 0 });

test('an inbox listing read before the user created a group does not drop it: the open group stays, loaded', async () => {
  const { api, state, sync } = rig();
  await sync.refreshInbox();
  const inbox = api.inbox;
  // A slow inbox read (a weak network) is on its way, listing what was
  // there when it was read; the one after it lists the new group too.
  const stale = await inbox();
  api.inbox = async () => [...(await inbox()), group(9, 'new')];
  const answer = holdInbox(api);
  const slow = sync.refreshInbox();
  // Meanwhile the user creates group 9 and opens it.
  api.createGroup = async (title) => ({ ...group(9, title), members: [{ userId: ME, role: 'owner', lastReadSeq: 0 }, { userId: 2, role: 'member', lastReadSeq: 0 }] });
  api.history = async () => [];
  const cid = await sync.createGroup('new', [2]);
  await sync.open(cid);
  assert.equal(state.conv(9).loaded, true);
  let dropped = false;
  state.addEventListener('change', () => (dropped ||= !state.conv(9)));
  answer(stale);
  await slow;
  await settle();
  const c = state.conv(9);
  assert.equal(dropped, false, 'the open group left the screen for a moment');
  assert.equal(c.loaded, true, 'the open group was dropped and came back empty: it shows "Loading…" for good');
  assert.equal(c.title, 'new');
});

test('an inbox listing read before the user was removed from a conversation does not bring it back', async () => {
  const { api, state, sync } = rig();
  const inbox = api.inbox;
  api.inbox = async () => [...(await inbox()), group(8, 'old')];
  await sync.refreshInbox();
  assert.ok(state.conv(8));
  const stale = await api.inbox();
  const answer = holdInbox(api);
  const slow = sync.refreshInbox();
  sync.onEvent({ type: 'member.removed', conversationId: 8, userId: ME });
  assert.equal(state.conv(8), null);
  answer(stale);
  await slow;
  await settle();
  assert.equal(state.conv(8), null, 'the conversation we were removed from is back in the inbox');
  assert.ok(state.conv(7));
});

test('the open conversation an inbox listing no longer holds (its member.removed was lost) is closed as on a removal, not left open blank', async () => {
  const { api, state, sync } = rig();
  const removed = [];
  sync.onRemoved = (cid) => removed.push(cid);
  const inbox = api.inbox;
  let listed = true;
  api.inbox = async () => [...(await inbox()), ...(listed ? [group(8, 'team')] : [])];
  await sync.refreshInbox();
  await sync.open(8);
  assert.equal(state.conv(8).loaded, true);
  // Removed meanwhile; the event did not reach this page (a full queue
  // keeps the stream's entries only). Another event has the inbox read.
  listed = false;
  sync.onEvent({ type: 'conversation.created', conversationId: 9 });
  await settle();
  assert.equal(state.conv(8), null);
  assert.deepEqual(removed, [8], 'the open conversation went from the inbox but was left open');
});

/** localStorage's interface over a Map. */
function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => m.get(k) ?? null,
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
    get length() {
      return m.size;
    },
    key: (i) => [...m.keys()][i] ?? null,
  };
}

/** navigator.locks for ifAvailable requests: the locks of live tabs are in held. */
function fakeLocks(...held) {
  const locks = { held: new Set(held), requested: [] };
  locks.request = async (name, opts, cb) => {
    assert.equal(opts.ifAvailable, true);
    locks.requested.push(name);
    if (locks.held.has(name)) return cb(null);
    locks.held.add(name);
    try {
      return await cb({ name, mode: 'exclusive' });
    } finally {
      locks.held.delete(name);
    }
  };
  return locks;
}

test('a page sends what a closed tab of the same user left unsent, in the order made, once; a live tab keeps its own', async (t) => {
  const storage = memoryStorage();
  const t0 = Date.now() - 3600 * 1000;
  const made = (s) => new Date(t0 + s * 1000).toISOString();
  const id = (n) => `00000000-0000-4000-8000-0000000000${n}`;
  // Tab b is closed; its suffix may no longer be in the 8-suffix list
  // (the outbox is found by its key). Tab c is still open.
  const b = new Outbox('web-1-b', storage);
  b.put(7, { clientMsgId: id('b1'), body: 'from closed b, first', createdAt: made(1) });
  b.put(7, { clientMsgId: id('ab'), body: 'kept in both', createdAt: made(2) });
  b.putChange(7, 'react', { clientMsgId: id('b3'), seq: 2, emoji: '👍', on: true }, made(4));
  new Outbox('web-1-c', storage).put(7, { clientMsgId: id('c1'), body: 'from live c', createdAt: made(0) });
  new Outbox('web-12-b', storage).put(7, { clientMsgId: id('u2'), body: 'another user', createdAt: made(0) });
  const a = new Outbox('web-1-a', storage);
  a.put(7, { clientMsgId: id('ab'), body: 'kept in both', createdAt: made(2) });
  a.put(7, { clientMsgId: id('a3'), body: 'from this tab', createdAt: made(3) });
  const locks = fakeLocks('chatd-client-1-a', 'chatd-client-1-c');

  const s = heldSession();
  const sync = new Sync(new ChatState(ME), fakeApi([msg(1), msg(2)]), s);
  sync.sendTimeoutMs = 50;
  t.after(() => sync.stop());
  sync.outbox = new Outbox('web-1-a', storage);
  await sync.outbox.adoptOrphans(locks);
  await sync.refreshInbox();
  await settle();
  assert.deepEqual(
    s.sent.map((x) => x.body ?? x.emoji),
    ['from closed b, first', 'kept in both', 'from this tab', '👍'],
    "the closed tab's outbox was not sent from this page, or not in the order made, or twice",
  );
  assert.equal(storage.getItem('chatd.outbox.web-1-b'), null, "the closed tab's outbox is left behind: a later page would send it again");
  assert.deepEqual(new Outbox('web-1-c', storage).list().map((x) => x.body), ['from live c'], "a live tab's outbox was taken");
  assert.deepEqual(new Outbox('web-12-b', storage).list().map((x) => x.body), ['another user'], "another user's outbox was taken");
  assert.ok(!locks.requested.includes('chatd-client-12-b'));
  assert.deepEqual(locks.held, new Set(['chatd-client-1-a', 'chatd-client-1-c']), 'a lock taken to move an outbox is still held');
});

test('without Web Locks a page sends what pages of other client ids of the same user left unsent', async (t) => {
  const storage = memoryStorage();
  const createdAt = new Date().toISOString();
  new Outbox('web-1-b', storage).put(7, { clientMsgId: '00000000-0000-4000-8000-0000000000b1', body: 'from b', createdAt });
  const { s, sync } = await pageAOfUser1WithoutWebLocks(t, storage);
  assert.deepEqual(s.sent.map((x) => x.body), ['from b']);
  assert.equal(storage.getItem('chatd.outbox.web-1-b'), null);
});

/**
 * The page of client id web-1-a over storage, without Web Locks: its sync
 * over a held session s (sends time out after 50 ms, stopped after the
 * test), its outbox's orphans adopted, its inbox refreshed.
 */
async function pageAOfUser1WithoutWebLocks(t, storage) {
  const s = heldSession();
  const sync = new Sync(new ChatState(ME), fakeApi([msg(1)]), s);
  sync.sendTimeoutMs = 50;
  t.after(() => sync.stop());
  sync.outbox = new Outbox('web-1-a', storage);
  await sync.outbox.adoptOrphans(null);
  await sync.refreshInbox();
  return { s, sync };
}

/** An MQTT session whose sends and changes wait until answer(clientMsgId, result) or refuse(clientMsgId, err). */
function heldSession() {
  const waiting = new Map();
  const s = new EventTarget();
  s.sent = [];
  s.send = (cid, clientMsgId, body) => {
    s.sent.push({ cid, clientMsgId, body });
    return new Promise((resolve, reject) => waiting.set(clientMsgId, { resolve, reject }));
  };
  s.change = (cid, topic, payload) => {
    s.sent.push({ cid, topic, ...payload });
    return new Promise((resolve, reject) => waiting.set(payload.clientMsgId, { resolve, reject }));
  };
  s.answer = (id, r) => waiting.get(id).resolve(r);
  s.refuse = (id, e) => waiting.get(id).reject(e);
  return s;
}

test('a later page sends again what an earlier one left unanswered, with its clientMsgId; not what chatd committed or refused', async () => {
  const { Outbox } = await import('../src/store/outbox.js');
  const storage = memoryStorage();
  const api = fakeApi([msg(1), msg(2), msg(3)]);
  const s1 = heldSession();
  const sync1 = new Sync(new ChatState(ME), api, s1);
  sync1.sendTimeoutMs = 50;
  sync1.outbox = new Outbox('web-1-a', storage);
  await sync1.refreshInbox();
  const lost = sync1.send(7, 'unanswered');
  const committed = sync1.send(7, 'committed');
  const refused = sync1.send(7, 'refused');
  s1.answer(committed, { seq: 4, duplicate: false });
  s1.refuse(refused, Object.assign(new Error('too large'), { reasonCode: 0x99 }));
  await settle();
  // The tab goes away; the next page of the same tab (client id) starts.
  const s2 = heldSession();
  const state2 = new ChatState(ME);
  const sync2 = new Sync(state2, api, s2);
  sync2.sendTimeoutMs = 50;
  sync2.outbox = new Outbox('web-1-a', storage);
  await sync2.refreshInbox();
  assert.deepEqual(s2.sent, [{ cid: 7, clientMsgId: lost, body: 'unanswered' }]);
  assert.deepEqual(state2.conv(7).pendingList().map((p) => [p.body, p.status]), [['unanswered', 'sending']]);
  // Another tab (another client id) does not send it too.
  const s3 = heldSession();
  const sync3 = new Sync(new ChatState(ME), api, s3);
  sync3.outbox = new Outbox('web-1-b', storage);
  await sync3.refreshInbox();
  assert.deepEqual(s3.sent, []);
  // Answered at last (a duplicate: the first attempt had got through).
  s2.answer(lost, { seq: 5, duplicate: true });
  await settle();
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
  for (const x of [sync1, sync2, sync3]) x.stop(); // the first page's unanswered send waits no more
});

for (const how of ['offline: the conversation is not known yet', 'online, the inbox slow: the conversation was opened from its link']) {
  test(`a send made before the first inbox answer goes after what an earlier page left unsent there (${how})`, async () => {
    const storage = memoryStorage();
    const api = fakeApi([msg(1), msg(2)]);
    const made = new Date(Date.now() - 60 * 1000).toISOString();
    const earlier = new Outbox('web-1-a', storage);
    earlier.put(7, { clientMsgId: '00000000-0000-4000-8000-0000000000e1', body: 'written on the earlier page', createdAt: made });
    earlier.putChange(7, 'react', { clientMsgId: '00000000-0000-4000-8000-0000000000e2', seq: 2, emoji: '👍', on: true }, made);
    const s = heldSession();
    const state = new ChatState(ME);
    const sync = new Sync(state, api, s);
    sync.sendTimeoutMs = 50;
    sync.outbox = new Outbox('web-1-a', storage);
    let inbox;
    if (how.startsWith('offline')) {
      api.down = true;
      await sync.refreshInbox();
      await sync.open(7); // shown from the link, still loading
    } else {
      const answer = api.inbox;
      let go;
      const gate = new Promise((r) => (go = r));
      api.inbox = async () => {
        await gate;
        return answer();
      };
      inbox = sync.refreshInbox();
      await sync.open(7);
      assert.ok(state.conv(7), 'the opened conversation is not known');
      inbox.go = go;
    }
    sync.send(7, 'written now');
    sync.react(7, 1, '🎉', true);
    if (inbox) inbox.go();
    else api.down = false;
    await (inbox ?? sync.refreshInbox()); // the inbox answers
    await settle();
    assert.deepEqual(
      s.sent.map((x) => x.body ?? x.emoji),
      ['written on the earlier page', '👍', 'written now', '🎉'],
      'not sent in the order made, or one twice',
    );
    if (inbox) assert.deepEqual(state.conv(7).pendingList().map((p) => p.body), ['written on the earlier page', 'written now']);
    sync.stop();
  });
}

test('typing in a second conversation right after the first tells its members too; typing on in one is throttled', () => {
  const { state, api } = rig();
  const typed = [];
  const sync = new Sync(state, api, Object.assign(new EventTarget(), { typing: (cid) => typed.push(cid) }));
  sync.typing(7);
  sync.typing(8);
  sync.typing(7);
  sync.typing(8);
  assert.deepEqual(typed, [7, 8]);
});

test('a send left unanswered more than a day ago is not sent out of the blue by a later page', async () => {
  const { Outbox } = await import('../src/store/outbox.js');
  const storage = memoryStorage();
  const api = fakeApi([msg(1)]);
  const old = new Outbox('web-1-a', storage);
  old.put(7, { clientMsgId: '00000000-0000-4000-8000-00000000000a', body: 'yesterday', createdAt: new Date(Date.now() - 25 * 3600 * 1000).toISOString() });
  old.put(7, { clientMsgId: '00000000-0000-4000-8000-00000000000b', body: 'just now', createdAt: new Date().toISOString() });
  const s = heldSession();
  const sync = new Sync(new ChatState(ME), api, s);
  sync.sendTimeoutMs = 50;
  sync.outbox = new Outbox('web-1-a', storage);
  await sync.refreshInbox();
  assert.deepEqual(s.sent.map((x) => x.body), ['just now']);
  assert.deepEqual(sync.outbox.list().map((x) => x.body), ['just now']);
  sync.stop();
});

test('a search hit whose conversation the user leaves while its older pages load does not jump there later', async () => {
  const { msgs, api, state, sync } = rig(Array.from({ length: 300 }, (_, i) => msg(i + 1)));
  await sync.refreshInbox();
  state.setConversation({ id: 8, type: 'GROUP', title: 'other', lastSeq: 0, members: [{ userId: ME, role: 'member', lastReadSeq: 0 }] });
  // Older pages come slowly (a weak network).
  const history = api.history;
  let olderPages = 0;
  api.history = async (cid, q) => {
    if (q.beforeSeq) {
      olderPages++;
      await new Promise((r) => setTimeout(r, 30));
    }
    return history(cid, q);
  };
  // The hit is #3: five pages back from the newest.
  const jumped = sync.jumpTo(7, 3);
  await new Promise((r) => setTimeout(r, 40));
  await sync.open(8); // the user goes elsewhere meanwhile
  assert.equal(await jumped, null, 'the user is told the hit is gone');
  const pages = olderPages;
  assert.ok(pages < 5, `older pages of the conversation left were still loaded: ${pages}`);
  assert.ok(!state.conv(7).focusSeq, 'opening the conversation again would scroll to the old hit');
});

test('a send written offline stays "Sending…" until the connection is back, and fails only after no answer while online', async () => {
  const api = fakeApi([msg(1)]);
  const state = new ChatState(ME);
  const s = heldSession();
  const sync = new Sync(state, api, s);
  sync.sendTimeoutMs = 100;
  await sync.refreshInbox();
  state.setConnection('online');
  state.setConnection('offline'); // the train enters the tunnel
  const id = sync.send(7, 'written in the tunnel');
  const status = () => state.conv(7).pending.get(id).status;
  await new Promise((r) => setTimeout(r, 300));
  // mqtt.js holds it and sends it on reconnect: "Not sent" would have the
  // user write it again, a second message.
  assert.equal(status(), 'sending', 'a send waiting for the network was shown as "Not sent"');
  state.setConnection('connecting');
  state.setConnection('online');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(status(), 'sending', 'failed before the reconnected session had its time to answer');
  await new Promise((r) => setTimeout(r, 250));
  assert.equal(status(), 'failed', 'no answer while online: "Not sent", with Retry');
});

test('back after a long absence, a busy conversation shows its newest messages after one request, not after walking every missed page', async () => {
  const { msgs, api, state, sync } = rig();
  await sync.refreshInbox();
  await sync.open(7);
  await settle();
  // A night offline: 2000 messages, none replayed (the session expired).
  for (let s = 4; s <= 2003; s++) msgs.push(msg(s));
  const reads = () => api.calls.filter((x) => x.startsWith('history 7')).length;
  const before = reads();
  await sync.resync();
  const c = state.conv(7);
  for (let i = 0; i < 100 && c.have < 2003; i++) await settle();
  assert.equal(c.have, 2003);
  assert.ok(reads() - before <= 2, `history was read ${reads() - before} times before the newest message showed`);
  const shown = c.visible().map((m) => m.seq);
  assert.deepEqual(shown, Array.from({ length: shown.length }, (_, i) => 2004 - shown.length + i), 'what is shown has no hole');
  assert.ok(c.hasOlder, 'the messages in between come on scrolling up');
  // Scrolling up brings them back, contiguous.
  await sync.loadOlder(7);
  const more = c.visible().map((m) => m.seq);
  assert.deepEqual(more, Array.from({ length: more.length }, (_, i) => 2004 - more.length + i));
  assert.ok(more.length > shown.length);
});

test('a group.updated entry caught up after the live conversation.updated was dropped (a full queue) renames the group on screen', async () => {
  const { api, state, sync } = rig();
  const inbox = api.inbox;
  api.inbox = async () => [...(await inbox()), { ...group(8, 'Climbing'), lastSeq: 4 }];
  const conversation = api.conversation;
  api.conversation = async (cid) => (cid === 8
    ? { ...group(8, 'Climbing'), lastSeq: 4, members: [{ userId: ME, role: 'member', lastReadSeq: 0 }, { userId: 2, role: 'owner', lastReadSeq: 0 }] }
    : conversation(cid));
  await sync.refreshInbox();
  await settle();
  assert.equal(state.conv(8).title, 'Climbing');
  // Only the stream's entries are caught up after an overflow: the
  // system.new entry comes, its conversation.updated does not.
  sync.onEvent({ type: 'system.new', conversationId: 8, seq: 5, actorId: 2, clientMsgId: 'x', createdAt: at(5),
    action: 'group.updated', title: 'Bouldering', avatar: '' });
  const c = state.conv(8);
  assert.equal(c.title, 'Bouldering');
  assert.equal(c.avatarUrl, null);
  assert.equal(c.about, '', 'a setting the entry does not list is left as it was');
  sync.onEvent({ type: 'system.new', conversationId: 8, seq: 6, actorId: 2, clientMsgId: 'y', createdAt: at(6),
    action: 'group.updated', about: 'Saturdays' });
  assert.equal(c.title, 'Bouldering', 'an entry that does not list the title keeps it');
  assert.equal(c.about, 'Saturdays');
});

/** Polls until ok() holds (deadline 2 s). */
async function until(ok, what) {
  for (const end = Date.now() + 2000; !ok(); ) {
    if (Date.now() > end) assert.fail(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A page of tab web-1-a over storage: its Sync, signed in and listed; stopped when test t ends. */
async function page(t, storage, msgs = [msg(1), msg(2), msg(3)]) {
  const s = heldSession();
  const state = new ChatState(ME);
  const sync = new Sync(state, fakeApi(msgs), s);
  sync.sendTimeoutMs = 50;
  sync.retryBaseMs = 5;
  sync.outbox = new Outbox('web-1-a', storage);
  const errors = [];
  sync.onError = (e) => errors.push(e);
  t.after(() => sync.stop()); // its sends' answer timers end, pass or fail
  await sync.refreshInbox();
  return { s, state, sync, errors };
}

test('edits, recalls and reactions a page left unanswered are sent again by a later page, in order after its sends, as explicit states; not those chatd answered', async (t) => {
  const storage = memoryStorage();
  const p1 = await page(t, storage);
  const lost = p1.sync.send(7, 'unanswered');
  p1.sync.edit(7, 2, 'fixed').catch(() => {});
  const on = p1.sync.react(7, 3, '👍', true);
  const off = p1.sync.react(7, 3, '👍', false);
  p1.sync.recall(7, 1).catch(() => {});
  p1.sync.edit(7, 1, 'too late').catch(() => {});
  const id = (topic, seq, extra = {}) => p1.s.sent.find((x) => x.topic === topic && x.seq === seq && Object.entries(extra).every(([k, v]) => x[k] === v)).clientMsgId;
  // Answered: the reaction set (the removal, of the same message, goes
  // out after it), and the recall; the later edit of the recalled message
  // is refused for good.
  p1.s.answer(id('react', 3, { on: true }), { seq: 4 });
  assert.equal(await on, 4);
  await until(() => p1.s.sent.some((x) => x.topic === 'react' && x.on === false), 'the removal goes out');
  p1.s.answer(id('recall', 1), { seq: 5 });
  await until(() => p1.s.sent.some((x) => x.topic === 'edit' && x.seq === 1), 'the edit of the recalled message goes out');
  p1.s.refuse(id('edit', 1), new SendError('message recalled', 0x87));
  await settle();
  const edit = id('edit', 2);
  const removal = id('react', 3, { on: false });

  // The tab goes away (a reload, a phone discarding it); the next page of
  // the same tab sends what was not answered, with the same clientMsgIds
  // and nothing but each topic's fields.
  const p2 = await page(t, storage);
  assert.deepEqual(p2.s.sent, [
    { cid: 7, clientMsgId: lost, body: 'unanswered' },
    { cid: 7, topic: 'edit', clientMsgId: edit, seq: 2, body: 'fixed' },
    { cid: 7, topic: 'react', clientMsgId: removal, seq: 3, emoji: '👍', on: false },
  ]);
  // Answered at last (the removal had got through: a duplicate).
  p2.s.answer(lost, { seq: 6 });
  p2.s.answer(edit, { seq: 7 });
  p2.s.answer(removal, { seq: 8, duplicate: true });
  await settle();
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
  assert.deepEqual(p2.errors, []);
  // A third page sends nothing again.
  const p3 = await page(t, storage);
  assert.deepEqual(p3.s.sent, []);
  off.catch(() => {});
});

test('an edit a later page sends again that chatd refuses for good (past the edit window) is told, as on the page that made it, and not sent again', async (t) => {
  const storage = memoryStorage();
  const p1 = await page(t, storage);
  p1.sync.edit(7, 2, 'fixed').catch(() => {});
  const p2 = await page(t, storage);
  assert.equal(p2.s.sent.length, 1, 'the edit is sent again');
  p2.s.refuse(p2.s.sent[0].clientMsgId, new SendError('edit window has passed', 0x87));
  await until(() => p2.errors.length > 0, 'the refusal is told');
  assert.deepEqual(p2.errors, ['Could not edit the message: edit window has passed']);
  await settle();
  assert.equal(p2.s.sent.length, 1, 'a final refusal was tried again');
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
  const p3 = await page(t, storage);
  assert.deepEqual(p3.s.sent, []);
});

test('a new reaction refused because the message carries the most distinct emoji (0x99, too_many_reactions) is told with the server\'s reason and not sent again', async (t) => {
  const storage = memoryStorage();
  const p = await page(t, storage);
  const why = 'message 3 carries 20 different reactions already: add to one of them, or wait until one is taken off';
  const on = p.sync.react(7, 3, '🦄', true);
  await until(() => p.s.sent.length === 1, 'the reaction goes out');
  p.s.refuse(p.s.sent[0].clientMsgId, new SendError(why, 0x99));
  const err = await on.then(() => null, (e) => e);
  assert.ok(err, 'the refusal rejects the reaction');
  assert.equal(changeFailedText('react', { on: true }, err), `Could not add the reaction: ${why}`);
  await settle();
  assert.equal(p.s.sent.length, 1, 'a final refusal was tried again');
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
});

test('a reaction set then removed while the server is busy ends removed: the removal waits for the set, tried again with its clientMsgId', async (t) => {
  const storage = memoryStorage();
  const p = await page(t, storage);
  const on = p.sync.react(7, 3, '👍', true);
  const off = p.sync.react(7, 3, '👍', false);
  await settle();
  assert.deepEqual(p.s.sent.map((x) => x.on), [true], 'the removal went out before the set was answered');
  const setId = p.s.sent[0].clientMsgId;
  p.s.refuse(setId, new SendError('Server busy', 0x97)); // rate limited: not final
  await until(() => p.s.sent.length === 2, 'the set is tried again');
  assert.deepEqual(p.s.sent.map((x) => [x.clientMsgId === setId, x.on]), [[true, true], [true, true]], 'the removal overtook the set tried again');
  assert.equal(new Outbox('web-1-a', storage).list().length, 2, 'both are kept until answered');
  p.s.answer(setId, { seq: 4 });
  assert.equal(await on, 4);
  await until(() => p.s.sent.length === 3, 'the removal goes out');
  assert.equal(p.s.sent[2].on, false);
  p.s.answer(p.s.sent[2].clientMsgId, { seq: 5 });
  assert.equal(await off, 5);
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
});

test('a group create asked again after it failed carries the same key; a new or other create a new one', async () => {
  const { api, sync } = rig();
  const keys = [];
  let fail = true;
  api.createGroup = async (title, members, key) => {
    keys.push(key);
    if (fail) throw new ApiError(0, 'network', 'network error: no answer in time');
    return { ...group(9, title), members: [{ userId: ME, role: 'owner', lastReadSeq: 0 }, ...members.map((userId) => ({ userId, role: 'member', lastReadSeq: 0 }))] };
  };
  await assert.rejects(sync.createGroup('trip', [2, 3]), { code: 'network' });
  fail = false;
  assert.equal(await sync.createGroup('trip', [2, 3]), 9);
  await sync.createGroup('trip', [2, 3]);
  fail = true;
  await assert.rejects(sync.createGroup('trip', [2]));
  await assert.rejects(sync.createGroup('trip', [2, 3]));
  assert.match(keys[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(keys[1], keys[0], 'the retry of a failed create carries its key');
  assert.notEqual(keys[2], keys[1], 'a create after one that succeeded is another group');
  assert.notEqual(keys[3], keys[2], 'other members are another group');
  assert.notEqual(keys[4], keys[3], 'changed back, another group again');
  assert.equal(new Set(keys).size, 4);
});

test('a send refused for a rate limit stays "Sending…" and goes out again with its clientMsgId once its retryAfter has passed, not before', async (t) => {
  const storage = memoryStorage();
  const p = await page(t, storage);
  // chatd's clock is the test's: a loaded machine delays real timers
  // (a settle() past the retryAfter, a wait past its deadline), this one
  // moves only when told.
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
  const id = p.sync.send(7, 'hello');
  const status = () => p.state.conv(7).pending.get(id).status;
  p.s.refuse(id, new SendError('rate limited: at most 10 messages per second per user (burst 30); retry in 100ms', 0x97, 1));
  await drain();
  assert.equal(status(), 'sending', 'a send waiting for its rate limit is shown as "Not sent"');
  assert.deepEqual(p.s.sent.map((x) => x.clientMsgId), [id], 'sent again at once');
  assert.equal(new Outbox('web-1-a', storage).list().length, 1, 'a later page would not send it');
  t.mock.timers.tick(999);
  await drain();
  assert.equal(p.s.sent.length, 1, 'sent again 999 ms after the refusal, before its retryAfter of 1 s');
  // retryAfter plus up to a quarter of it (retryAfterDelay's spread).
  t.mock.timers.tick(251);
  await drain();
  assert.equal(p.s.sent.length, 2, 'not sent again 1.25 s after a refusal with a retryAfter of 1 s');
  assert.equal(p.s.sent[1].clientMsgId, id);
  assert.equal(status(), 'sending');
  p.s.answer(id, { seq: 4 });
  await drain();
  assert.equal(status(), 'sent');
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
});

test('a message written while an earlier one of the conversation waits to be sent again (rate limit) goes out after it, so chatd numbers them in the order written', async (t) => {
  const storage = memoryStorage();
  const p = await page(t, storage);
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
  const first = p.sync.send(7, 'first');
  p.s.refuse(first, new SendError('rate limited; retry in 100ms', 0x97, 1));
  await drain();
  const second = p.sync.send(7, 'second');
  await drain();
  assert.deepEqual(p.s.sent.map((x) => x.body), ['first'], 'the second message went out while the first waited to be sent again: chatd would number it first');
  t.mock.timers.tick(1250);
  await drain();
  assert.deepEqual(p.s.sent.map((x) => x.body), ['first', 'first']);
  p.s.answer(first, { seq: 4 });
  await drain();
  assert.deepEqual(p.s.sent.map((x) => x.body), ['first', 'first', 'second'], 'the second message did not go out after the first was sent');
  p.s.answer(second, { seq: 5 });
  await drain();
  assert.deepEqual(p.state.conv(7).visible().map((m) => m.body).slice(-2), ['first', 'second']);
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
});

test('an edit refused for a rate limit is tried again no sooner than its retryAfter, however short the backoff', async (t) => {
  const storage = memoryStorage();
  const p = await page(t, storage); // backoff from 5 ms
  const started = Date.now();
  const edited = p.sync.edit(7, 2, 'fixed');
  await settle();
  const id = p.s.sent[0].clientMsgId;
  p.s.refuse(id, new SendError('rate limited', 0x97, 1));
  await until(() => p.s.sent.length === 2, 'the edit goes out again');
  assert.ok(Date.now() - started >= 1000, `tried again after ${Date.now() - started} ms, before its retryAfter of 1 s`);
  // Without a retryAfter, its own backoff.
  const again = Date.now();
  p.s.refuse(id, new SendError('server busy', 0x97));
  await until(() => p.s.sent.length === 3, 'the edit goes out a third time');
  assert.ok(Date.now() - again < 900, `without retryAfter it waited ${Date.now() - again} ms`);
  p.s.answer(id, { seq: 4 });
  assert.equal(await edited, 4);
});

test('a catch-up refused with 429 is tried again no sooner than its Retry-After', async () => {
  const tries = [];
  const { sync } = await gapCaughtUp((history, cid, q) => {
    tries.push(Date.now());
    if (tries.length === 1) throw new ApiError(429, 'rate_limited', 'rate limited', 1);
    return history(cid, q);
  });
  assert.equal(tries.length, 2);
  assert.ok(tries[1] - tries[0] >= 1000, `tried again after ${tries[1] - tries[0]} ms, before its Retry-After of 1 s`);
  sync.stop();
});

test("a large group's slim message.new or reaction.updated the user wrote on another device adds no unread badge: the server moved their watermark", async () => {
  const { api, state, sync } = rig();
  const inbox = api.inbox;
  api.inbox = async () => [...(await inbox()), { ...group(9, 'Everyone'), lastSeq: 10, lastReadSeq: 8, unread: 2 }];
  await sync.refreshInbox();
  const c = state.conv(9);
  assert.equal(c.unread, 2);
  // Sent from the user's phone: the event of a large group has no body.
  sync.onEvent({ type: 'message.new', conversationId: 9, seq: 11, senderId: ME });
  assert.equal(c.unread, 0, 'own message from another device counted as unread');
  sync.onEvent({ type: 'message.new', conversationId: 9, seq: 12, senderId: 2 });
  assert.equal(c.unread, 1);
  // Reacted from the phone: writing anything moves the writer's watermark.
  sync.onEvent({ type: 'reaction.updated', conversationId: 9, seq: 13, targetSeq: 12, userId: ME });
  assert.equal(c.unread, 0, 'own reaction from another device leaves the messages before it unread');
});

test("a conversation's member list read before the user was removed from it, answered after the removal, does not bring it back", async () => {
  const { api, state, sync } = rig();
  const inbox = api.inbox;
  api.inbox = async () => [...(await inbox()), group(8, 'old')];
  await sync.refreshInbox();
  await sync.refreshMembers(8); // held: an event says when they change
  await settle();
  assert.ok(state.conv(8));
  // Another member joins: the member list is read again, slowly.
  const read = { ...group(8, 'old'), members: [{ userId: ME, role: 'member', lastReadSeq: 0 }, { userId: 3, role: 'member', lastReadSeq: 0 }] };
  let answer;
  api.conversation = () => new Promise((resolve) => (answer = resolve));
  sync.onEvent({ type: 'member.added', conversationId: 8, userId: 3 });
  // We are removed before its answer comes.
  sync.onEvent({ type: 'member.removed', conversationId: 8, userId: ME });
  assert.equal(state.conv(8), null);
  answer(read);
  await settle();
  assert.equal(state.conv(8), null, 'the conversation we were removed from is back in the inbox');
});

test('a send retried after it failed keeps its place: a later page sends it again before the sends made after it', async (t) => {
  const storage = memoryStorage();
  const { s, state, sync } = await page(t, storage);
  state.setConnection('online');
  const first = sync.send(7, 'first');
  const second = sync.send(7, 'second');
  // No answer: both fail ("Retry"); the user retries the first.
  await until(() => state.conv(7).pending.get(first).status === 'failed', 'the first send failing');
  sync.retry(7, first);
  assert.deepEqual(s.sent.map((x) => x.body), ['first', 'second', 'first']);
  // The tab goes away before chatd answers; the next page of the tab starts.
  const later = await page(t, storage);
  assert.deepEqual(later.s.sent.map((x) => [x.body, x.clientMsgId]), [['first', first], ['second', second]], 'the retried send went out after the one made after it');
});

test('a send an earlier page left unanswered that history already shows (it got through) is not shown twice while it goes out again', async (t) => {
  const storage = memoryStorage();
  const msgs = [msg(1), msg(2), msg(3, ME)];
  // The earlier page's send of #3 got through; the tab closed before its PUBACK.
  new Outbox('web-1-a', storage).put(7, { clientMsgId: msgs[2].clientMsgId, body: msgs[2].body, createdAt: new Date().toISOString() });
  const s = heldSession();
  const state = new ChatState(ME);
  const api = fakeApi(msgs);
  const sync = new Sync(state, api, s);
  sync.sendTimeoutMs = 50;
  sync.outbox = new Outbox('web-1-a', storage);
  t.after(() => sync.stop());
  // The page opens at #/c/7: the conversation loads before the slow inbox.
  const answer = holdInbox(api);
  const listed = sync.refreshInbox();
  await sync.open(7);
  assert.deepEqual(state.conv(7).visible().map((m) => m.seq), [1, 2, 3]);
  answer(await fakeApi(msgs).inbox());
  await listed;
  assert.deepEqual(s.sent.map((x) => x.clientMsgId), [msgs[2].clientMsgId], 'sent again, with its clientMsgId');
  assert.deepEqual(state.conv(7).pendingList().map((p) => p.body), [], 'shown twice: committed and "Sending…"');
});

test('a send refused for server trouble (0x80) is kept for a later page and tried again with its clientMsgId, backing off; one refused for good is dropped', async (t) => {
  const storage = memoryStorage();
  const p = await page(t, storage);
  const id = p.sync.send(7, 'hello');
  const status = () => p.state.conv(7).pending.get(id)?.status;
  p.s.refuse(id, new SendError('database unavailable', 0x80));
  await settle();
  assert.deepEqual(new Outbox('web-1-a', storage).list().map((x) => x.clientMsgId), [id], 'dropped from the outbox: a reload loses the message');
  await until(() => p.s.sent.length === 2, 'the send goes out again');
  assert.equal(p.s.sent[1].clientMsgId, id);
  assert.equal(status(), 'sending');
  p.s.refuse(id, new SendError('too large', 0x95));
  await settle();
  assert.equal(status(), 'failed');
  assert.deepEqual(new Outbox('web-1-a', storage).list(), []);
  assert.equal(p.s.sent.length, 2);
});

test("a recalled message's files are forgotten (their blob: URLs revoked) when the recall arrives, live or caught up from history", async () => {
  const photo = (seq, id) => ({ ...msg(seq), body: '', msgType: 'image', attachments: [{ id, name: `${id}.jpg`, contentType: 'image/jpeg', size: 9 }] });
  const { msgs, state, sync } = rig([msg(1), photo(2, 'live'), photo(3, 'caught'), photo(4, 'stays')]);
  const forgotten = [];
  sync.onRecalled = (ids) => forgotten.push(...ids);
  await sync.refreshInbox();
  await sync.open(7);
  await settle();
  const c = state.conv(7);
  assert.deepEqual(c.visible().map((m) => m.seq), [1, 2, 3, 4]);
  // Recalled live.
  sync.onEvent({ type: 'message.recalled', conversationId: 7, seq: 5, targetSeq: 2, actorId: 2, recalledAt: at(5) });
  assert.deepEqual(forgotten, ['live'], "a live recall left the recalled photo's download in memory");
  // Recalled while the connection was down: catch-up brings the recall.
  msgs.push({ conversationId: 7, seq: 5, kind: 'recall', targetSeq: 2, actorId: 2, createdAt: at(5) });
  msgs.push({ conversationId: 7, seq: 6, kind: 'recall', targetSeq: 3, actorId: 2, createdAt: at(6) });
  msgs.push(msg(7));
  sync.onEvent({ type: 'message.new', ...msg(7) }); // past a gap: history fills it
  await settle();
  assert.equal(c.messages.get(3).recalled, true);
  assert.deepEqual(forgotten, ['live', 'caught'], "a recall caught up from history left the recalled photo's download in memory");
});

/** Message seq from user 2 as the server has it (pushed to msgs) and as it comes live. */
function live(sync, msgs, seq) {
  msgs.push(msg(seq));
  sync.onEvent({ type: 'message.new', ...msg(seq) });
}

const seqsFrom = (first, last) => Array.from({ length: last - first + 1 }, (_, i) => first + i);

test('the conversation on screen, scrolled to its newest messages, keeps a bounded window however many come live; scrolling back up loads what went, in order', async () => {
  const { msgs, state, sync } = rig();
  await sync.refreshInbox();
  await sync.open(7);
  const c = state.conv(7);
  c.atBottom = true; // the view follows the newest messages (views/conversation.js)
  for (let seq = 4; seq <= 1000; seq++) live(sync, msgs, seq);
  await settle();
  assert.ok(c.messages.size <= 400, `the conversation on screen holds ${c.messages.size} messages`);
  const oldest = c.oldest;
  assert.deepEqual(c.visible().map((m) => m.seq), seqsFrom(oldest, 1000), 'not the newest messages, contiguous');
  assert.equal(c.hasOlder, true);
  // Scrolled up: what the user reads stays, however many come live.
  c.atBottom = false;
  while (c.oldest > 1) {
    const before = c.oldest;
    await sync.loadOlder(7);
    assert.ok(c.oldest < before, `scrolling up from #${before} loaded nothing`);
  }
  for (let seq = 1001; seq <= 1500; seq++) live(sync, msgs, seq);
  await settle();
  assert.deepEqual(c.visible().map((m) => m.seq), seqsFrom(1, 1500));
});

test('a search hit far back stays loaded though messages come live while the pages up to it load, the view at the newest messages until then', async () => {
  const { msgs, state, sync } = rig(seqsFrom(1, 500).map((seq) => msg(seq)));
  await sync.refreshInbox();
  await sync.open(7);
  const c = state.conv(7);
  c.atBottom = true;
  // A message comes between two pages.
  const loadOlder = sync.loadOlder.bind(sync);
  let next = 501;
  sync.loadOlder = async (cid) => {
    await loadOlder(cid);
    live(sync, msgs, next++);
  };
  assert.equal(await sync.jumpTo(7, 5), true, 'the hit was not loaded');
  for (let seq = next; seq <= 1000; seq++) live(sync, msgs, seq);
  await settle();
  assert.ok(c.messages.has(5), 'the hit was dropped once loaded');
});

test('a search hit far back is reached though a page of older messages was on its way (the user scrolled up) when the jump started', async () => {
  const { api, state, sync } = rig(seqsFrom(1, 500).map((seq) => msg(seq)));
  await sync.refreshInbox();
  await sync.open(7);
  // The page the scroll asked for comes over the network, later.
  const history = api.history;
  let arrive;
  api.history = (...args) => {
    api.history = history;
    return new Promise((resolve) => (arrive = () => resolve(history(...args))));
  };
  const scrolling = sync.loadOlder(7);
  const jump = sync.jumpTo(7, 5);
  setTimeout(() => arrive(), 10);
  assert.equal(await jump, true, 'the jump gave up on the hit');
  await scrolling;
  assert.ok(state.conv(7).messages.has(5));
});

test('a search hit loaded for a jump stays until the view shows it, though the view, rendering a page at the newest messages, said it follows them', async () => {
  const { msgs, state, sync } = rig(seqsFrom(1, 500).map((seq) => msg(seq)));
  await sync.refreshInbox();
  await sync.open(7);
  const c = state.conv(7);
  c.atBottom = true;
  assert.equal(await sync.jumpTo(7, 5), true, 'the hit was not loaded');
  // The view learns of the jump when it renders the hit (in the next
  // frame). A page that landed before the last one was rendered at the
  // newest messages, where the view still sticks: its scroll event told
  // the store the view follows them. Messages come before the hit is
  // rendered.
  c.atBottom = true;
  for (let seq = 501; seq <= 1000; seq++) live(sync, msgs, seq);
  await settle();
  assert.ok(c.messages.has(5), 'the hit was dropped before the view showed it');
});

test('a send refused too_large is marked so (no Retry can pass) and the user may take it back off the page', async () => {
  const api = fakeApi([msg(1)]);
  const s = heldSession();
  const sync = new Sync(new ChatState(ME), api, s);
  await sync.refreshInbox();
  const big = sync.send(7, 'too long');
  const busy = sync.send(7, 'not now');
  s.refuse(big, Object.assign(new Error('body is larger than 16384 bytes'), { reasonCode: 0x99 }));
  s.refuse(busy, Object.assign(new Error('not authorized'), { reasonCode: 0x87 }));
  await settle();
  assert.deepEqual(sync.state.conv(7).pendingList().map((p) => [p.body, p.status, !!p.tooLarge]), [['too long', 'failed', true], ['not now', 'failed', false]]);
  sync.discard(7, big);
  assert.deepEqual(sync.state.conv(7).pendingList().map((p) => p.body), ['not now']);
  sync.stop();
});

test("the user's own re-add heard only as its system entry (member.removed and member.added lost with a full queue) counts none of the seqs of their absence unread: the inbox is read, as on member.added", async () => {
  const { api, state, sync } = rig();
  const inbox = api.inbox;
  // Read up to seq 3; then removed at 3 (its entry 4 goes to those who
  // stay), 5 written while away, added back at 5: its entry is 6.
  let team = { ...group(8, 'team'), lastSeq: 3, lastReadSeq: 3 };
  api.inbox = async () => [...(await inbox()), team];
  api.conversation = async (cid) => ({ ...team, id: cid, members: [{ userId: ME, role: 'member', lastReadSeq: 3 }, { userId: 2, role: 'owner', lastReadSeq: 6 }] });
  await sync.refreshInbox();
  assert.equal(state.conv(8).unread, 0);
  team = { ...team, lastSeq: 6, unread: 0 };
  sync.onEvent({ type: 'system.new', conversationId: 8, seq: 6, actorId: 2, action: 'member.added', userId: ME, role: 'member', clientMsgId: 'x', createdAt: at(6) });
  await settle();
  assert.equal(state.conv(8).unread, 0, 'the seqs written while the user was not a member count as unread messages');
});

/**
 * A page open on conversation 7 (msgs: seqs 1 to 3), online, whose send of
 * 'slow' chatd has not answered: shown "Not sent". c is the conversation,
 * id the send's clientMsgId.
 */
async function unansweredSend(t, storage = memoryStorage()) {
  const msgs = [msg(1), msg(2), msg(3)];
  const { s, state, sync } = await page(t, storage, msgs);
  await sync.open(7);
  state.setConnection('online');
  const id = sync.send(7, 'slow');
  const c = state.conv(7);
  await until(() => c.pending.get(id)?.status === 'failed', 'the send failing after no answer');
  return { msgs, s, sync, id, c };
}

/** Message seq of ours, as the server committed send clientMsgId (body) of conversation 7. */
const ours = (seq, clientMsgId, body) => ({ ...msg(seq, ME), clientMsgId, body });

for (const how of ['its message.new comes live', 'a catch-up brings it', 'its PUBACK comes late']) {
  test(`a send shown "Not sent" after no answer that chatd commits later becomes the sent message, once, without Retry (${how})`, async (t) => {
    const { msgs, s, sync, id, c } = await unansweredSend(t);
    msgs.push(ours(4, id, 'slow'));
    if (how.startsWith('its message.new')) sync.onEvent({ type: 'message.new', ...ours(4, id, 'slow') });
    else if (how.startsWith('a catch-up')) {
      msgs.push(msg(5));
      sync.onEvent({ type: 'message.new', ...msg(5) }); // past a gap: history fills it
    } else s.answer(id, { seq: 4, duplicate: false });
    await settle();
    assert.deepEqual(c.pendingList().map((p) => [p.body, p.status]), [], 'the failed bubble (with Retry) is still on the page');
    assert.deepEqual(c.visible().filter((m) => m.clientMsgId === id).map((m) => [m.seq, m.body]), [[4, 'slow']], 'not shown once as sent');
    sync.retry(7, id); // a Retry clicked as the bubble turned
    assert.equal(s.sent.length, 1, 'sent again though committed');
  });
}

test('a Retry pressed on a send chatd commits late sends it again with its clientMsgId only: both answers and the event show one message', async (t) => {
  const storage = memoryStorage();
  const { msgs, s, sync, id, c } = await unansweredSend(t, storage);
  sync.retry(7, id);
  assert.deepEqual(s.sent.map((x) => x.clientMsgId), [id, id], 'the Retry did not resend with the same clientMsgId');
  msgs.push(ours(4, id, 'slow'));
  s.answer(id, { seq: 4, duplicate: true }); // the resend's: the first attempt had got through
  await settle();
  sync.onEvent({ type: 'message.new', ...ours(4, id, 'slow') });
  await settle();
  assert.deepEqual(c.pendingList(), []);
  assert.deepEqual(c.visible().map((m) => m.seq), [1, 2, 3, 4]);
  assert.deepEqual(new Outbox('web-1-a', storage).list(), [], 'a later page would send it a third time');
  await new Promise((r) => setTimeout(r, 120)); // past both attempts' answer timers
  assert.deepEqual(c.pendingList(), [], 'marked failed again after it was answered');
  assert.equal(s.sent.length, 2);
});

test('a send shown "Not sent" after no answer that chatd then refuses for now (0x80: the database timed out) shows "Sending…" while the page sends it again by itself', async (t) => {
  const { s, sync, id, c } = await unansweredSend(t);
  sync.sendTimeoutMs = 10000; // the resend is answered below, before its own answer timer
  s.refuse(id, new SendError('database unavailable', 0x80));
  await settle();
  assert.deepEqual(c.pendingList().map((p) => [p.status, p.error]), [['sending', null]], '"Not sent" with Retry while it goes out again on its own');
  await until(() => s.sent.length === 2, 'the send going out again');
  s.answer(id, { seq: 4, duplicate: false });
  await settle();
  assert.deepEqual(c.pendingList(), []);
  assert.deepEqual(c.visible().map((m) => m.seq), [1, 2, 3, 4]);
});

/**
 * A tab's view of storage whose writes reach it only when land() is
 * called: the other tab of a browser that runs tabs in processes of their
 * own, whose read and then write of a key are not ordered against
 * another tab's.
 */
function laggingView(storage) {
  const writes = [];
  return {
    view: {
      getItem: (k) => storage.getItem(k),
      setItem: (k, v) => writes.push(() => storage.setItem(k, v)),
      removeItem: (k) => writes.push(() => storage.removeItem(k)),
      get length() {
        return storage.length;
      },
      key: (i) => storage.key(i),
    },
    land: () => writes.splice(0).forEach((w) => w()),
  };
}

test("signing out forgets the user's unsent messages, those another tab of the signed-out session writes back at that moment too: the next sign-in as the user sends none of them", async (t) => {
  const storage = memoryStorage();
  const createdAt = new Date().toISOString();
  const id = (n) => `00000000-0000-4000-8000-0000000000${n}`;
  const here = new Outbox('web-1-a', storage);
  here.put(7, { clientMsgId: id('a1'), body: 'unsent here', createdAt });
  // The user's other tab, not yet told of the sign-out (its storage event
  // still to come), keeps a send and a change it makes at that moment.
  const other = laggingView(storage);
  const there = new Outbox('web-1-b', other.view);
  there.put(7, { clientMsgId: id('b1'), body: 'written back by the other tab', createdAt });
  Outbox.clearUser(1, storage);
  other.land();
  there.putChange(7, 'edit', { clientMsgId: id('b2'), seq: 1, body: 'edited there' }, createdAt);
  other.land();
  // A late retry of the signed-out page itself.
  here.put(7, { clientMsgId: id('a2'), body: 'late in the signed-out page', createdAt });
  const kept = () =>
    Object.fromEntries(
      [...Array(storage.length).keys()].map((i) => storage.key(i)).filter((k) => k.startsWith('chatd.outbox.')).map((k) => [k, storage.getItem(k)]),
    );

  // Signed in again as the user in this tab (its client id kept), the
  // other tab gone.
  const { s, sync } = await pageAOfUser1WithoutWebLocks(t, storage);
  await settle();
  assert.deepEqual(s.sent.map((x) => x.body), [], "the next sign-in sent what the signed-out session left unsent");
  assert.deepEqual(kept(), {}, "an unsent message of the signed-out session stayed in the browser");
  assert.deepEqual(new Outbox('web-1-b', storage).list(), []);

  // What the signed-in session keeps, it keeps (the same millisecond as
  // the sign-out too).
  sync.outbox.put(7, { clientMsgId: id('n1'), body: 'after signing in', createdAt });
  assert.deepEqual(new Outbox('web-1-a', storage).list().map((x) => x.body), ['after signing in']);
});
