// A client id another user's session holds: chatd refuses the CONNECT with
// 0x85 client identifier not valid (docs/protocol.md "Every refused
// CONNECT"), and docs/mobile.md has the device connect with a client id of
// its own, the user still signed in. The web client's MqttSession
// (src/mqtt-session.js, mqtt.js over WebSocket) against a server that
// answers as chatd does, and the ids and outbox it moves to (auth.js,
// store/outbox.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_CLIENT_ID_RENEWALS, MqttSession } from '../src/mqtt-session.js';
import { Outbox } from '../src/store/outbox.js';

const REASON = "client identifier not valid: another user's session holds this client id; connect with one of this device's own";

/**
 * An MQTT 5 server over WebSocket that refuses the client ids in refused
 * with CONNACK 0x85 and chatd's reason string, and otherwise accepts,
 * grants subscriptions and acknowledges QoS 1 publishes with a seq.
 * connects: the client ids of every CONNECT; publishes: every PUBLISH's
 * payload, in arrival order.
 */
async function startServer() {
  const { WebSocketServer } = await import('ws');
  const mqttPacket = (await import('mqtt-packet')).default;
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  const srv = { refused: new Set(), connects: [], publishes: [], sockets: new Set(), seq: 0 };
  wss.on('connection', (ws) => {
    srv.sockets.add(ws);
    ws.on('close', () => srv.sockets.delete(ws));
    const send = (p) => ws.send(mqttPacket.generate(p, { protocolVersion: 5 }));
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    parser.on('packet', (p) => {
      if (p.cmd === 'connect') {
        srv.connects.push(p.clientId);
        if (srv.refused.has(p.clientId)) {
          send({ cmd: 'connack', sessionPresent: false, reasonCode: 0x85, properties: { reasonString: REASON } });
          ws.close();
          return;
        }
        send({ cmd: 'connack', sessionPresent: false, reasonCode: 0 });
      } else if (p.cmd === 'subscribe') {
        send({ cmd: 'suback', messageId: p.messageId, granted: p.subscriptions.map(() => 1) });
      } else if (p.cmd === 'publish') {
        srv.publishes.push(JSON.parse(p.payload.toString()));
        send({ cmd: 'puback', messageId: p.messageId, reasonCode: 0, properties: { userProperties: { seq: String(++srv.seq) } } });
      } else if (p.cmd === 'pingreq') {
        send({ cmd: 'pingresp' });
      }
    });
    ws.on('message', (data) => parser.parse(data));
  });
  srv.url = `ws://127.0.0.1:${wss.address().port}/mqtt`;
  globalThis.location ??= new URL(srv.url.replace(/^ws/, 'http'));
  srv.close = async () => {
    for (const ws of wss.clients) ws.terminate();
    await new Promise((r) => wss.close(r));
  };
  return srv;
}

/** Polls cond until it holds, or fails with what after ms. */
async function until(cond, what, ms = 10000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A session of user 1's with clientId, recording its events; renew answers each refused id. */
function session(srv, clientId, renew) {
  const rec = { renewed: [], unauthorized: 0, refused: [], connected: [], statuses: [] };
  const renewClientId = async (refused) => {
    rec.renewed.push(refused);
    return renew(refused);
  };
  const s = new MqttSession({ userId: 1, token: 't', clientId, url: srv.url, renewClientId });
  s.addEventListener('unauthorized', () => rec.unauthorized++);
  s.addEventListener('refused', (e) => rec.refused.push(e.detail));
  s.addEventListener('connected', (e) => rec.connected.push(e.detail));
  s.addEventListener('status', (e) => rec.statuses.push(e.detail));
  s.addEventListener('error', () => {});
  return { s, rec };
}

test('a first CONNECT refused 0x85 is made again with a client id of its own, and a send made before it goes out once', async () => {
  const srv = await startServer();
  srv.refused.add('web-1-aaaaaaaaaaaa');
  const { s, rec } = session(srv, 'web-1-aaaaaaaaaaaa', () => 'web-1-bbbbbbbbbbbb');
  try {
    s.connect();
    // Written before the first CONNACK: held for it.
    const sent = s.send(7, 'm-early', 'hello');
    await until(() => rec.connected.length === 1, 'online with a new client id');
    assert.deepEqual(await sent, { seq: 1, duplicate: false, unchanged: false });
    assert.deepEqual(srv.connects, ['web-1-aaaaaaaaaaaa', 'web-1-bbbbbbbbbbbb']);
    assert.deepEqual(rec.renewed, ['web-1-aaaaaaaaaaaa']);
    assert.equal(s.clientId, 'web-1-bbbbbbbbbbbb');
    assert.deepEqual(rec.connected, [{ first: true, sessionPresent: false }]);
    assert.equal(rec.unauthorized, 0, 'signed out for a client id');
    assert.deepEqual(srv.publishes.map((p) => p.clientMsgId), ['m-early']);
  } finally {
    s.close();
    await srv.close();
  }
});

test('a reconnect refused 0x85 is made with a client id of its own, and what was queued offline goes out once, then the catch-up of a new session starts', async () => {
  const srv = await startServer();
  const { s, rec } = session(srv, 'web-1-aaaaaaaaaaaa', () => 'web-1-cccccccccccc');
  try {
    s.connect();
    await until(() => rec.connected.length === 1, 'first connection');
    // The connection drops; meanwhile another user's session took the id.
    srv.refused.add('web-1-aaaaaaaaaaaa');
    for (const ws of srv.sockets) ws.terminate();
    await until(() => rec.statuses.at(-1) === 'offline', 'offline');
    // Sent offline: mqtt.js keeps it until a connection takes it.
    const sent = s.send(7, 'm-offline', 'written offline');
    await until(() => rec.connected.length === 2, 'online again with a new client id');
    assert.deepEqual(await sent, { seq: 1, duplicate: false, unchanged: false });
    assert.deepEqual(srv.connects, ['web-1-aaaaaaaaaaaa', 'web-1-aaaaaaaaaaaa', 'web-1-cccccccccccc']);
    // 'connected' after a new session: Sync reads the inbox and fills
    // what the session did not replay.
    assert.deepEqual(rec.connected[1], { first: false, sessionPresent: false });
    assert.equal(rec.unauthorized, 0, 'signed out for a client id');
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(srv.publishes.map((p) => p.clientMsgId), ['m-offline'], 'the queued send went out other than once');
  } finally {
    s.close();
    await srv.close();
  }
});

test(`a server refusing every client id gets ${MAX_CLIENT_ID_RENEWALS} new ones in a row, then the session stops and the user stays signed in`, async () => {
  const srv = await startServer();
  let n = 0;
  const { s, rec } = session(srv, 'web-1-000000000000', () => {
    const id = `web-1-${String(++n).padStart(12, '0')}`;
    srv.refused.add(id);
    return id;
  });
  srv.refused.add('web-1-000000000000');
  try {
    s.connect();
    await until(() => rec.refused.length === 1, 'the session stops', 15000);
    assert.equal(srv.connects.length, 1 + MAX_CLIENT_ID_RENEWALS);
    assert.equal(new Set(srv.connects).size, srv.connects.length, `an id was tried twice: ${srv.connects}`);
    assert.equal(rec.renewed.length, MAX_CLIENT_ID_RENEWALS);
    assert.equal(rec.statuses.at(-1), "refused", String(rec.statuses));
    assert.equal(rec.refused[0].code, 0x85);
    assert.equal(rec.unauthorized, 0, 'signed out for a client id');
    // Stopped: no attempt is scheduled, and a send says why it cannot go.
    assert.equal(s.client.reconnectTimer, null, 'a reconnect is still scheduled');
    await assert.rejects(s.send(7, 'm-late', 'too late'), /refused/);
    const connects = srv.connects.length;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(srv.connects.length, connects, 'connected again after stopping');
  } finally {
    s.close();
    await srv.close();
  }
});

test('a send queued offline when the session then stops, every client id refused, is answered not sent (kept for a later page), not left sending for ever', async () => {
  const srv = await startServer();
  let n = 0;
  const { s, rec } = session(srv, 'web-1-000000000000', () => {
    const id = `web-1-${String(++n).padStart(12, '0')}`;
    srv.refused.add(id);
    return id;
  });
  try {
    s.connect();
    await until(() => rec.connected.length === 1, 'first connection');
    // The connection drops; another user's session takes the id, and
    // the server refuses every new one.
    srv.refused.add(s.clientId);
    for (const ws of srv.sockets) ws.terminate();
    await until(() => rec.statuses.at(-1) === 'offline', 'offline');
    // Sent offline: handed to mqtt.js, which keeps it for a connection
    // that never comes.
    let answer = null;
    s.send(7, 'm-offline', 'written offline').then(
      (v) => (answer = { sent: v }),
      (e) => (answer = { err: e }),
    );
    await until(() => rec.refused.length === 1, 'the session stops', 15000);
    await until(() => answer !== null, 'the send queued offline answered once the session stopped', 3000);
    assert.ok(answer.err, `the send was answered ${JSON.stringify(answer)}`);
    assert.match(answer.err.message, /refused/);
    // No reason code: Sync keeps it in the outbox, for a later page.
    assert.equal(answer.err.reasonCode, undefined);
    assert.deepEqual(srv.publishes, [], 'a publish reached the server');
  } finally {
    s.close();
    await srv.close();
  }
});

test('a connection that gets in resets the count of new client ids', async () => {
  const srv = await startServer();
  let n = 0;
  const { s, rec } = session(srv, 'web-1-000000000000', () => `web-1-${String(++n).padStart(12, '0')}`);
  try {
    // MAX_CLIENT_ID_RENEWALS refusals, each separated by a connection
    // that got in: never stopped.
    s.connect();
    for (let i = 0; i <= MAX_CLIENT_ID_RENEWALS; i++) {
      await until(() => rec.connected.length === i + 1, `connection ${i + 1}`);
      srv.refused.add(s.clientId);
      for (const ws of srv.sockets) ws.terminate();
    }
    await until(() => rec.connected.length === MAX_CLIENT_ID_RENEWALS + 2, 'online after the last refusal', 15000);
    assert.deepEqual(rec.refused, []);
    assert.equal(rec.renewed.length, MAX_CLIENT_ID_RENEWALS + 1);
  } finally {
    s.close();
    await srv.close();
  }
});

test('the new client id takes over the outbox of the refused one: each entry once, in the order made', () => {
  const storage = memoryStorage();
  const made = (s) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  const outbox = new Outbox('web-1-aaaaaaaaaaaa', storage);
  outbox.put(7, { clientMsgId: 'm1', body: 'first', createdAt: made(1) });
  outbox.putChange(7, 'recall', { clientMsgId: 'm2', seq: 3 }, made(2));
  outbox.moveTo('web-1-bbbbbbbbbbbb');
  assert.deepEqual(outbox.list().map((e) => e.clientMsgId), ['m1', 'm2']);
  assert.equal(storage.getItem('chatd.outbox.web-1-aaaaaaaaaaaa'), null, 'left under the refused id too');
  outbox.put(7, { clientMsgId: 'm3', body: 'after', createdAt: made(3) });
  outbox.delete('m1');
  assert.deepEqual(new Outbox('web-1-bbbbbbbbbbbb', storage).list().map((e) => e.clientMsgId), ['m2', 'm3']);
});

test('a new client id is one no tab holds nor had, and the refused one is neither kept nor held', async () => {
  const { storage, held } = memoryLocks((opts) => assert.equal(opts.ifAvailable, true));
  try {
    const { claimClientId, forgetClientId, releaseClientId } = await import('../src/auth.js');
    const first = await claimClientId(1);
    const suffix = (id) => id.split('-')[2];
    assert.ok(held.has(`chatd-client-1-${suffix(first)}`));
    forgetClientId(first);
    const fresh = await claimClientId(1, { fresh: true });
    assert.notEqual(fresh, first);
    assert.match(fresh, /^web-1-[0-9a-f]{12}$/);
    releaseClientId(first);
    await until(() => !held.has(`chatd-client-1-${suffix(first)}`), 'the refused id released');
    assert.ok(held.has(`chatd-client-1-${suffix(fresh)}`), 'the new id is not held');
    assert.deepEqual(JSON.parse(storage.getItem('chatd.clientSuffixes')), [suffix(fresh)], 'the refused suffix would be claimed again');
    // Another tab (a page load while this one is open): neither id.
    const other = await claimClientId(1);
    assert.ok(![first, fresh].includes(other), `another tab got ${other}`);
  } finally {
    delete globalThis.localStorage;
    delete globalThis.navigator;
  }
});

/**
 * Puts a localStorage over a Map and a navigator.locks in globalThis (the
 * test deletes both when done). locks.request grants a lock no one holds
 * and calls back with null for one held, as with ifAvailable; checkOpts,
 * when given, is called first with each request's options. held is the
 * names of the locks held.
 */
function memoryLocks(checkOpts) {
  const storage = memoryStorage();
  const held = new Set();
  const locks = {
    request: async (name, opts, cb) => {
      checkOpts?.(opts);
      if (held.has(name)) return cb(null);
      held.add(name);
      try {
        return await cb({ name });
      } finally {
        held.delete(name);
      }
    },
  };
  globalThis.localStorage = storage;
  Object.defineProperty(globalThis, 'navigator', { value: { locks }, configurable: true, writable: true });
  return { storage, held };
}

/** localStorage's interface over a Map. */
function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
    get length() {
      return m.size;
    },
    key: (i) => [...m.keys()][i] ?? null,
  };
}

test('a session stopped for good, every client id refused, leaves none of them for the next page to claim: its first CONNECT after a reload is not refused', async () => {
  const srv = await startServer();
  const { held } = memoryLocks();
  const { claimClientId, forgetClientId, releaseClientId } = await import('../src/auth.js');
  // As main.js renews a refused id, the server refusing every one.
  const renew = async (refused) => {
    forgetClientId(refused);
    const id = await claimClientId(1, { fresh: true });
    srv.refused.add(id);
    releaseClientId(refused);
    return id;
  };
  const first = await claimClientId(1);
  srv.refused.add(first);
  const s = new MqttSession({ userId: 1, token: 't', clientId: first, url: srv.url, renewClientId: renew, forgetClientId });
  let stopped = false;
  s.addEventListener('refused', () => (stopped = true));
  s.addEventListener('error', () => {});
  try {
    s.connect();
    await until(() => stopped, 'the session stops', 15000);
    const last = s.clientId;
    // The page reloads: its locks go.
    releaseClientId(last);
    await until(() => held.size === 0, 'the locks released');
    const next = await claimClientId(1);
    assert.ok(!srv.refused.has(next), `the reloaded page claims ${next}, refused before (last: ${last})`);
  } finally {
    s.close();
    await srv.close();
    delete globalThis.localStorage;
    delete globalThis.navigator;
  }
});

test('a tab whose session stopped for good, every client id refused, signed out and in again in the same tab connects with an id not refused: its first CONNECT gets in, and the refused id is let go', async () => {
  const srv = await startServer();
  const { held } = memoryLocks();
  const { TabClientIds, clientLockName } = await import('../src/auth.js');
  // As main.js uses them, the server refusing every id for now.
  const tab = new TabClientIds();
  const renew = async (refused) => {
    const id = await tab.renew(1, refused);
    srv.refused.add(id);
    return id;
  };
  const first = await tab.claim(1);
  srv.refused.add(first);
  const s = new MqttSession({ userId: 1, token: 't', clientId: first, url: srv.url, renewClientId: renew, forgetClientId: (id) => tab.forget(1, id) });
  let stopped = false;
  s.addEventListener('refused', () => (stopped = true));
  s.addEventListener('error', () => {});
  let again = null;
  try {
    s.connect();
    await until(() => stopped, 'the session stops', 15000);
    const last = s.clientId;
    // Signed out in this tab (main.js signOut), then in again as the user.
    s.close();
    tab.release(1, last);
    await until(() => !held.has(clientLockName(1, last.split('-')[2])), `the tab still holds ${last}, which it never connects with again: what is left under it is no page's to take`);
    const before = srv.connects.length;
    const next = await tab.claim(1);
    assert.ok(!srv.refused.has(next), `signed in again, the tab connects with ${next}, refused before (last: ${last})`);
    let online = false;
    again = new MqttSession({ userId: 1, token: 't', clientId: next, url: srv.url, renewClientId: renew, forgetClientId: (id) => tab.forget(1, id) });
    again.addEventListener('status', (e) => e.detail === 'online' && (online = true));
    again.addEventListener('error', () => {});
    again.connect();
    await until(() => online, 'online again');
    assert.deepEqual(srv.connects.slice(before), [next], 'a CONNECT of the signed-in-again tab was refused');
  } finally {
    s.close();
    again?.close();
    await srv.close();
    delete globalThis.localStorage;
    delete globalThis.navigator;
  }
});
