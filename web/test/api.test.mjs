// Unit tests of the HTTP client (src/api.js) and what Sync does with it,
// against a real HTTP server on loopback that can leave a request
// unanswered, as a connection that died on a mobile network does: no
// reset, no answer. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Api, INBOX_PAGES } from '../src/api.js';
import { ChatState } from '../src/store/state.js';
import { Sync } from '../src/store/sync.js';

globalThis.document ??= { visibilityState: 'visible' };

/** A chatd stand-in whose inbox lists conversation 7 (and that creates group 9); stall() leaves the next request unanswered. */
async function server() {
  let stallNext = false;
  const stalled = [];
  const srv = http.createServer((req, res) => {
    if (stallNext) {
      stallNext = false;
      stalled.push(res);
      return;
    }
    if (req.url === '/v1/proxy-limited') {
      // A proxy's refusal: Retry-After, an HTML page.
      res.writeHead(429, { 'Retry-After': '150', 'Content-Type': 'text/html' });
      res.end('<h1>429 Too Many Requests</h1>');
      return;
    }
    res.setHeader('Content-Type', 'application/json');
    if (req.url === '/v1/limited') {
      res.writeHead(429, { 'Retry-After': '2' });
      res.end(JSON.stringify({ error: { code: 'rate_limited', message: 'rate limited: at most 20 requests per second (burst 40); retry in 1.5s', retryAfter: 2 } }));
    } else if (req.url.startsWith('/v1/inbox')) {
      res.end(JSON.stringify({ conversations: [{ id: 7, type: 'DIRECT', peerId: 2, lastSeq: 0, lastReadSeq: 0, unread: 0 }], nextCursor: '' }));
    } else if (req.method === 'POST' && req.url === '/v1/conversations') {
      // A new group, echoing the create's Idempotency-Key.
      res.statusCode = 201;
      res.end(JSON.stringify({ id: 9, type: 'GROUP', lastSeq: 0, members: [], idempotencyKey: req.headers['idempotency-key'] }));
    } else if (req.url.startsWith('/v1/conversations/7')) {
      res.end(JSON.stringify({ id: 7, type: 'DIRECT', lastSeq: 0, members: [{ userId: 1, role: 'member', lastReadSeq: 0 }] }));
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'not found' } }));
    }
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return {
    base,
    stall: () => (stallNext = true),
    close: () => {
      for (const res of stalled) res.destroy();
      srv.closeAllConnections();
      return new Promise((r) => srv.close(r));
    },
  };
}

/** The page's fetch: paths are relative to its origin, here base. */
function pageFetch(base) {
  const real = globalThis.fetch;
  globalThis.fetch = (path, init) => real(new URL(path, base), init);
  return () => (globalThis.fetch = real);
}

/**
 * Runs fn with a fresh server() and an Api of the page's whose requests
 * go to it: warmed up (fetch loaded, so only a stall can time out), with
 * a timeout of 1 s. The server is closed after.
 */
async function withServer(fn) {
  const srv = await server();
  const restore = pageFetch(srv.base);
  try {
    const api = new Api('token');
    await api.conversation(7);
    api.timeoutMs = 1000;
    await fn(srv, api);
  } finally {
    restore();
    await srv.close();
  }
}

test('the catch-up after a reconnect is not stuck behind an inbox read that never got an answer', async () => {
  await withServer(async (srv, api) => {
    const state = new ChatState(1);
    const sync = new Sync(state, api, new EventTarget());
    // The first inbox read goes out on a connection that has just died.
    srv.stall();
    const first = sync.refreshInbox();
    // MQTT notices (keep-alive), reconnects, and resyncs.
    await new Promise((r) => setTimeout(r, 50));
    sync.resync();
    const end = Date.now() + 10000;
    while (!state.conv(7) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    assert.ok(state.conv(7), 'the inbox after the reconnect never came: the catch-up waits for a request that has no answer');
    await first;
  });
});

test('a request that gets no answer fails as a network error once the time is up', async () => {
  await withServer(async (srv, api) => {
    srv.stall();
    const started = Date.now();
    let timer;
    const err = await Promise.race([
      api.conversation(7).then(() => null, (e) => e),
      new Promise((r) => (timer = setTimeout(() => r('no answer after 10 s'), 10000))),
    ]);
    clearTimeout(timer);
    assert.equal(err?.code, 'network', `failed as a network error: ${err}`);
    assert.ok(Date.now() - started < 8000);
    assert.equal((await api.conversation(7)).id, 7, 'the next request is answered');
  });
});

test('a group create sends its key in the Idempotency-Key header', async () => {
  await withServer(async (_srv, api) => {
    const key = '5b0e7c1a-8f3d-4e2b-9c6a-1d2e3f4a5b6c';
    const conv = await api.createGroup('trip', [2], key);
    assert.equal(conv.idempotencyKey, key);
  });
});

test("a 429 carries its Retry-After, and one without the server's message (a proxy's page) says when to try again", async () => {
  await withServer(async (_srv, api) => {
    api.maxRetries = 0; // the refusal as a caller gets it once the retries end
    const chatd = await api.request('GET', '/v1/limited').then(() => null, (e) => e);
    assert.equal(chatd?.code, 'rate_limited');
    assert.equal(chatd.retryAfter, 2);
    assert.match(chatd.message, /retry in 1\.5s/, 'the server says when itself');
    const proxy = await api.request('GET', '/v1/proxy-limited').then(() => null, (e) => e);
    assert.equal(proxy?.status, 429);
    assert.equal(proxy.retryAfter, 150);
    assert.equal(proxy.message, 'too many requests: try again in 3 min');
  });
});

test('a conversation that gets a message while the inbox is read page by page is still listed: not taken for one the user left', async () => {
  // chatd's keyset pages (docs/http.md): most recent activity first; one
  // that gets a message meanwhile moves ahead of the pages read already.
  const convs = Array.from({ length: 250 }, (_, i) => ({ id: i + 1, at: 1000 - i }));
  const api = new Api('token');
  let reads = 0;
  let moveAt = -1;
  api.request = async (method, path) => {
    const q = new URL(path, 'http://x').searchParams;
    const limit = Number(q.get('limit'));
    const after = q.get('cursor') ? JSON.parse(q.get('cursor')) : null;
    // Between the first page and the second, #230 gets a message.
    if (reads++ === moveAt) convs.find((c) => c.id === 230).at = 2000;
    const sorted = [...convs].sort((a, b) => b.at - a.at || b.id - a.id);
    const rest = after ? sorted.filter((c) => c.at < after.at || (c.at === after.at && c.id < after.id)) : sorted;
    const page = rest.slice(0, limit);
    const last = page.at(-1);
    return {
      conversations: page.map((c) => ({ id: c.id, type: 'GROUP', title: `g${c.id}`, lastSeq: 1, lastReadSeq: 1, unread: 0 })),
      nextCursor: rest.length > limit ? JSON.stringify({ at: last.at, id: last.id }) : '',
    };
  };
  const state = new ChatState(1);
  state.setInbox((await api.inbox()).map((e) => ({ ...e })));
  assert.equal(state.conversations.size, 250);
  moveAt = reads + 1;
  const sync = new Sync(state, api, new EventTarget());
  sync.loadMissingMembers = async () => {};
  await sync.refreshInbox();
  assert.ok(state.conv(230), 'the conversation that moved up while the inbox was paged was dropped as if the user had left it');
  assert.equal(state.conversations.size, 250);
});

/** An api whose inbox lists convs ids (most recent first) in keyset pages, counting its reads. */
function pagedInbox(ids) {
  const api = new Api('token');
  api.reads = 0;
  api.request = async (method, path) => {
    api.reads++;
    const q = new URL(path, 'http://x').searchParams;
    const limit = Number(q.get('limit'));
    const from = q.get('cursor') ? Number(q.get('cursor')) : 0;
    const page = ids(from, limit);
    return {
      conversations: page.map((id) => ({ id, type: 'GROUP', title: `g${id}`, lastSeq: 1, lastReadSeq: 1, unread: 0 })),
      nextCursor: page.length === limit ? String(from + limit) : '',
    };
  };
  return api;
}

test('a user in more conversations than one inbox read follows keeps those past its bound: not taken for ones they left', async () => {
  // chatd bounds no user's memberships: 100 more than INBOX_PAGES pages of 200.
  const total = INBOX_PAGES * 200 + 100;
  const api = pagedInbox((from, limit) => Array.from({ length: Math.max(0, Math.min(limit, total - from)) }, (_, i) => from + i + 1));
  const state = new ChatState(1);
  // Held already (an earlier read, their events): the last one is open.
  state.setInbox(Array.from({ length: total }, (_, i) => ({ id: i + 1, type: 'GROUP', title: `g${i + 1}`, lastSeq: 1, lastReadSeq: 1, unread: 0 })));
  state.openId = total;
  const removed = [];
  state.addEventListener('removed', (e) => removed.push(e.detail));
  const sync = new Sync(state, api, new EventTarget());
  sync.loadMissingMembers = async () => {};
  const warned = [];
  const warn = console.warn;
  console.warn = (...a) => warned.push(a.join(' '));
  try {
    await sync.refreshInbox();
  } finally {
    console.warn = warn;
  }
  assert.equal(api.reads, INBOX_PAGES + 1, 'the bound pages, and the first again');
  assert.deepEqual(removed.slice(0, 5), [], `${removed.length} conversations past the bound were dropped as if the user had left them`);
  assert.equal(state.conversations.size, total);
  assert.ok(state.conv(total), 'the open conversation past the bound was closed');
  assert.equal(state.openId, total);
  assert.equal(warned.length, 1, 'a read cut short says so on the console');
  assert.match(warned[0], /10000 conversations/);
});

test('an inbox read of a runaway server (pages without end) ends, and says it is cut short; one that ends says it is complete', async () => {
  const api = pagedInbox((from, limit) => Array.from({ length: limit }, (_, i) => from + i + 1));
  const list = await api.inbox();
  assert.equal(api.reads, INBOX_PAGES + 1);
  assert.equal(list.length, INBOX_PAGES * 200);
  assert.equal(list.complete, false);
  const whole = await pagedInbox((from, limit) => Array.from({ length: Math.max(0, Math.min(limit, 450 - from)) }, (_, i) => from + i + 1)).inbox();
  assert.equal(whole.length, 450);
  assert.equal(whole.complete, true);
});

test("chatd's time is read from its answers' Date: a page whose clock is minutes off compares events' times with chatd's clock, not its own", async () => {
  const real = globalThis.fetch;
  const behind = 5 * 60e3; // chatd's clock is five minutes behind this computer's
  globalThis.fetch = async () => Response.json({ id: 7 }, { headers: { Date: new Date(Date.now() - behind).toUTCString() } });
  try {
    const api = new Api('token');
    await api.conversation(7);
    const off = Date.now() - behind - api.serverNow();
    assert.ok(Math.abs(off) <= 1500, `serverNow is ${off} ms off chatd's clock`);
  } finally {
    globalThis.fetch = real;
  }
});
