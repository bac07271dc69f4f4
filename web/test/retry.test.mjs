// Unit tests of the HTTP client's retries (src/api.js Api.exchange): a
// request chatd answers "not now" (429, 503) is sent again when its repeat
// is harmless, after the Retry-After or a backoff, within a bound, and
// the views are told while it waits. A stand-in fetch answers as chatd
// would. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Api, ApiError } from '../src/api.js';
import { retryAfterSeconds } from '../src/retry.js';
import { ChatState } from '../src/store/state.js';
import { Sync } from '../src/store/sync.js';

globalThis.document ??= { visibilityState: 'visible' };

const json = (status, body, headers = {}) => new Response(body === null ? null : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
const limited = (s) => json(429, { error: { code: 'rate_limited', message: `rate limited: at most 50 requests per second (burst 100); retry in ${s}s`, retryAfter: s } }, { 'Retry-After': String(s) });
const unavailable = () => json(503, { error: { code: 'unavailable', message: 'the database is unavailable' } });
const inbox = () => json(200, { conversations: [{ id: 7, type: 'DIRECT', peerId: 2, lastSeq: 0, lastReadSeq: 0, unread: 0 }], nextCursor: '' });
const conv7 = () => json(200, { id: 7, type: 'DIRECT', lastSeq: 0, members: [{ userId: 1, role: 'member', lastReadSeq: 0 }, { userId: 2, role: 'member', lastReadSeq: 0 }] });

/**
 * Runs fn(api, calls) with fetch answering each request by route(method,
 * path, n) (n: how many requests to that method and path came before);
 * calls lists every request ({method, path, at}).
 */
async function withChatd(route, fn) {
  const real = globalThis.fetch;
  const calls = [];
  const seen = new Map();
  globalThis.fetch = async (path, init) => {
    const k = `${init.method || 'GET'} ${path}`;
    const n = seen.get(k) || 0;
    seen.set(k, n + 1);
    calls.push({ method: init.method || 'GET', path, at: Date.now() });
    return route(init.method || 'GET', path, n);
  };
  try {
    await fn(new Api('token'), calls);
  } finally {
    globalThis.fetch = real;
  }
}

const failure = (p) => p.then(() => null, (e) => e);

/** Polls until ok() holds, failing with what after 5 s. */
async function until(ok, what) {
  const end = Date.now() + 5000;
  while (!ok()) {
    assert.ok(Date.now() < end, what);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('an inbox load answered 429 is sent again after its Retry-After and loads; meanwhile the inbox says chatd is busy', async () => {
  await withChatd(
    (method, path, n) => (path.startsWith('/v1/inbox') ? (n === 0 ? limited(1) : inbox()) : conv7()),
    async (api, calls) => {
      const state = new ChatState(1);
      const sync = new Sync(state, api, new EventTarget());
      const errors = [];
      sync.onError = (m) => errors.push(m);
      const shown = [];
      state.addEventListener('change', () => shown.push(state.waits.get('inbox') || ''));
      await sync.refreshInbox();
      const loads = calls.filter((c) => c.path.startsWith('/v1/inbox'));
      assert.equal(loads.length, 2, 'the inbox is asked for again');
      assert.ok(loads[1].at - loads[0].at >= 1000, `asked again after ${loads[1].at - loads[0].at} ms, before the 1 s Retry-After`);
      assert.ok(state.conv(7), 'the inbox loaded');
      assert.deepEqual(errors, [], 'no error shown');
      assert.ok(shown.includes('chatd is busy, retrying in 1 s'), `the inbox showed ${JSON.stringify(shown)}`);
      assert.equal(state.waits.get('inbox'), undefined, 'the wait is no longer shown');
    },
  );
});

test('a read answered 503 without Retry-After is sent again after a backoff that grows', async () => {
  await withChatd(
    (method, path, n) => (n < 2 ? unavailable() : conv7()),
    async (api, calls) => {
      api.retryBaseMs = 100;
      const c = await api.conversation(7);
      assert.equal(c.id, 7);
      assert.equal(calls.length, 3);
      const [a, b, d] = calls.map((x) => x.at);
      assert.ok(b - a >= 75, `first retry after ${b - a} ms: no backoff`);
      assert.ok(d - b >= 150, `second retry after ${d - b} ms: the backoff did not grow`);
    },
  );
});

test('a POST is sent again only when its repeat is harmless: a keyed group create is, a token revocation is not', async () => {
  await withChatd(
    (method, path, n) => (n === 0 ? unavailable() : json(path === '/v1/conversations' ? 201 : 200, { id: 9, type: 'GROUP', revokedBefore: '2026-12-05T12:00:00Z' })),
    async (api, calls) => {
      api.retryBaseMs = 20;
      const g = await api.createGroup('trip', [2], '5b0e7c1a-8f3d-4e2b-9c6a-1d2e3f4a5b6c');
      assert.equal(g.id, 9, 'the keyed create succeeds on its retry');
      assert.equal(calls.filter((c) => c.path === '/v1/conversations').length, 2);
      const err = await failure(api.revokeTokens());
      assert.ok(err instanceof ApiError && err.status === 503, `the revocation failed with its 503: ${err}`);
      assert.equal(calls.filter((c) => c.path === '/v1/me/tokens/revoke').length, 1, 'the revocation was sent again');
    },
  );
});

test('retries end after their bound: the inbox shows the error as before, and a Retry-After past the bound is not waited for', async () => {
  await withChatd(
    (method, path) => (path.startsWith('/v1/inbox') ? limited(1) : limited(3600)),
    async (api, calls) => {
      api.retryForMs = 1500;
      const state = new ChatState(1);
      const sync = new Sync(state, api, new EventTarget());
      const errors = [];
      sync.onError = (m) => errors.push(m);
      await sync.refreshInbox();
      assert.equal(calls.length, 2, `one retry within 1.5 s, then none: ${calls.length} requests`);
      assert.deepEqual(errors, ['Could not load conversations: rate limited: at most 50 requests per second (burst 100); retry in 1s']);
      assert.equal(state.waits.get('inbox'), undefined, 'no wait shown any more');
      const started = Date.now();
      const err = await failure(api.me());
      assert.equal(err?.code, 'rate_limited');
      assert.equal(err.retryAfter, 3600);
      assert.ok(Date.now() - started < 500, 'waited for an hour-long Retry-After');
      assert.equal(calls.length, 3);
    },
  );
});

test('an aborted request stops its retries at once', async () => {
  await withChatd(
    () => unavailable(),
    async (api, calls) => {
      api.retryBaseMs = 300;
      const ctl = new AbortController();
      const waits = [];
      const p = failure(api.members(7, { signal: ctl.signal, onWait: (s) => waits.push(s) }));
      await until(() => waits.length, 'no wait before a retry: the 503 was not retried');
      ctl.abort();
      const started = Date.now();
      const err = await p;
      assert.equal(err?.code, 'aborted', `ended with ${err}`);
      assert.ok(Date.now() - started < 100, 'the wait went on after the abort');
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(calls.length, 1, 'sent again after the abort');
    },
  );
});

test('opening another conversation stops the retries of the one left', async () => {
  await withChatd(
    (method, path) => {
      if (path.startsWith('/v1/conversations/7')) return unavailable();
      return path.includes('/messages') ? json(200, { messages: [] }) : json(200, { id: 8, type: 'DIRECT', lastSeq: 0, members: [] });
    },
    async (api, calls) => {
      api.retryBaseMs = 300;
      const state = new ChatState(1);
      const sync = new Sync(state, api, new EventTarget());
      const first = sync.open(7);
      await until(() => state.waits.get(7), 'no wait shown in the conversation: its 503 was not retried');
      await sync.open(8);
      await first;
      await new Promise((r) => setTimeout(r, 600));
      // Its members and its newest page are asked for at once: each once.
      const asked = new Map();
      for (const { path } of calls) if (path.startsWith('/v1/conversations/7')) asked.set(path, (asked.get(path) ?? 0) + 1);
      for (const [path, n] of asked) assert.equal(n, 1, `conversation 7 was asked for again: ${path}`);
      assert.equal(state.waits.get(7), undefined, 'its wait is still shown');
    },
  );
});

test('a read whose fetch failed (a network error) is sent again; a write is not', async () => {
  await withChatd(
    (method, path, n) => {
      if (n === 0) throw new TypeError('Failed to fetch');
      return conv7();
    },
    async (api, calls) => {
      api.retryBaseMs = 20;
      assert.equal((await api.conversation(7)).id, 7);
      assert.equal(calls.length, 2);
      const err = await failure(api.markRead(7, 3));
      assert.equal(err?.code, 'network');
      assert.equal(calls.length, 3);
    },
  );
});

test('a Retry-After that is an HTTP date counts the seconds until then', () => {
  const s = retryAfterSeconds(new Date(Date.now() + 10000).toUTCString());
  assert.ok(s >= 9 && s <= 10, `${s} s`);
  assert.equal(retryAfterSeconds(new Date(Date.now() - 10000).toUTCString()), 0, 'a date passed asks for no wait');
  assert.equal(retryAfterSeconds('7'), 7);
});
