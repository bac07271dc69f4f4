// HTTP API client (docs/http.md). Same origin, Bearer JWT; every failure
// becomes an ApiError carrying the server's error code so callers branch on
// `code`, never on message text. A refusal that says "not now" (429, 503)
// of a request whose repeat is harmless is sent again here, the one place
// that decides it (see Api.exchange).

import { backoffDelay, retryAfterDelay, retryAfterSeconds } from './retry.js';

export class ApiError extends Error {
  /**
   * retryAfter: the seconds a 429 or 503 asks to wait (Retry-After), 0 if
   * none. A 429 without the server's message (a proxy's) says it in words.
   */
  constructor(status, code, message, retryAfter = 0) {
    super(message || (status === 429 && retryAfter > 0 ? `too many requests: try again in ${inWords(retryAfter)}` : code || `HTTP ${status}`));
    this.status = status;
    this.code = code || 'network';
    this.retryAfter = retryAfter;
  }
}

/** s seconds as a person reads them. */
function inWords(s) {
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.ceil(s / 60)} min`;
  return `${Math.ceil(s / 3600)} h`;
}

/**
 * The most inbox pages (of 200) one read follows: 10,000 conversations.
 * Each page is a request of the user's API budget (CHAT_LIMIT_API_BURST
 * 100): a read of more would be throttled at every reconnect.
 */
export const INBOX_PAGES = 50;

/** Whether an answer with this status says "not now": a retry later may succeed. */
function busy(status) {
  return status === 429 || status === 503;
}

/** The retryAfter of a 429 or 503: its Retry-After header (seconds or a date), else its error body's. */
export function retryAfterOf(status, header, err) {
  if (!busy(status)) return 0;
  return retryAfterSeconds(header) || retryAfterSeconds(err?.retryAfter);
}

/**
 * What the user is told while a request waits to be sent again after err
 * (an ApiError): s seconds from now.
 */
export function waitText(s, err) {
  return `${err.status ? 'chatd is busy' : 'Cannot reach chatd'}, retrying in ${s} s`;
}

/**
 * Whether a request may be sent again as it is: chatd answers its repeat
 * as the first (docs/http.md). GET, PUT and DELETE are; a POST or PATCH
 * only with an Idempotency-Key, or when its route says so (idempotent).
 */
function repeatable(method, headers, idempotent) {
  return idempotent || ['GET', 'PUT', 'DELETE'].includes(method) || 'Idempotency-Key' in headers;
}

/**
 * Options of a request (every method takes them last):
 * @typedef {{signal?: AbortSignal, onWait?: (s: number, err: ApiError) => void}} Req
 * signal: aborted when the answer is no longer wanted (the view went
 * away): the request and its retries stop, failing with code "aborted".
 * onWait(s, err): while waiting to retry after err, the seconds left, once
 * a second; onWait(0) when the retry goes out.
 */

export class Api {
  /**
   * @param {string} token the user's JWT
   * @param {() => void} onUnauthorized called on any 401: the token expired
   *   or the server's secret changed, and only signing in again helps
   */
  constructor(token, onUnauthorized = () => {}) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
    // A request, its answer included, that takes longer fails as a network
    // error. A connection that died without a reset (a phone changing
    // cells) leaves fetch waiting for many minutes, and the catch-up after
    // a reconnect would wait behind it.
    this.timeoutMs = 30000;
    // Retries of a request chatd answered "not now" (see exchange): a
    // person waits for most of these answers, so not for long.
    this.maxRetries = 5;
    this.retryForMs = 30000;
    this.retryBaseMs = 1000;
    this.retryCapMs = 8000;
    // How far this computer's clock is ahead of chatd's (ms), from the
    // Date of its last answer: see serverNow.
    this.clockOffset = 0;
  }

  /**
   * chatd's time now (ms epoch), as far as the Date of its last answer
   * tells (whole seconds): what an event's createdAt is compared with. A
   * computer's clock can be minutes off.
   */
  serverNow() {
    return Date.now() - this.clockOffset;
  }

  /**
   * method path with a JSON body (if not undefined): the answer's JSON,
   * null for 204; an ApiError when it is not 2xx.
   * @param {Req & {idempotent?: boolean}} req idempotent: a POST or PATCH
   *   whose repeat chatd answers as the first
   */
  async request(method, path, body, extraHeaders = {}, req = {}) {
    const headers = { ...extraHeaders, Authorization: `Bearer ${this.token}` };
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const { res, data } = await this.exchange(path, init, req, repeatable(method, extraHeaders, req.idempotent));
    if (res.status === 204) return null;
    if (!res.ok) throw this.refusal(res, data);
    return data;
  }

  /**
   * fetchJSON, sent again while chatd answers "not now" (429, 503) a
   * request that may be repeated, and after a network failure of a GET
   * (fetch failing, not a timeout) while the browser is online: after
   * the Retry-After the answer gives, else a backoff (retryBaseMs
   * doubling to retryCapMs, jittered). At most maxRetries times, and
   * only while the first try was less than retryForMs ago (a wait that
   * would end later is not begun: the last answer stands, and the caller
   * shows it as it would have). An abort of req.signal ends it.
   */
  async exchange(path, init, req, repeat) {
    const { signal, onWait = () => {} } = req;
    const start = Date.now();
    for (let attempt = 1; ; attempt++) {
      let answer = null;
      let err;
      try {
        answer = await this.fetchJSON(path, init, signal);
        if (!busy(answer.res.status)) return answer;
        const e = answer.data?.error;
        err = new ApiError(answer.res.status, e?.code, e?.message, retryAfterOf(answer.res.status, answer.res.headers.get('Retry-After'), e));
      } catch (e) {
        if (e.code !== 'network') throw e;
        err = e;
      }
      // A network failure: a GET is asked again while the browser is
      // online, unless it went unanswered for timeoutMs already.
      const lost = !answer && init.method === 'GET' && !err.timedOut && globalThis.navigator?.onLine !== false;
      const again = repeat && attempt <= this.maxRetries && (answer || lost);
      const wait = err.retryAfter ? retryAfterDelay(err.retryAfter) : backoffDelay(attempt, this.retryBaseMs, this.retryCapMs);
      if (!again || Date.now() + wait - start > this.retryForMs) {
        if (answer) return answer;
        throw err;
      }
      await pause(wait, signal, (s) => onWait(s, err));
      onWait(0, err);
    }
  }

  /**
   * fetch within timeoutMs, the JSON body read: {res, data}. data is null
   * for 204, 304 and a body that is not JSON (a proxy's HTML error page);
   * a 2xx whose body cannot be read (cut off) fails as a network error.
   * An abort of signal fails with code "aborted".
   */
  async fetchJSON(path, init, signal) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.timeoutMs);
    const cancel = () => ctl.abort();
    signal?.addEventListener('abort', cancel);
    const failed = (e) => {
      if (signal?.aborted) return aborted();
      const err = new ApiError(0, 'network', ctl.signal.aborted ? 'network error: no answer in time' : 'network error: ' + e.message);
      err.timedOut = ctl.signal.aborted;
      return err;
    };
    try {
      if (signal?.aborted) throw aborted();
      let res;
      try {
        res = await fetch(path, { ...init, signal: ctl.signal });
      } catch (e) {
        throw failed(e);
      }
      // Date is whole seconds: chatd's clock was within the second after it.
      const date = Date.parse(res.headers?.get?.('Date') || '');
      if (Number.isFinite(date)) this.clockOffset = Date.now() - (date + 500);
      if (res.status === 204 || res.status === 304) return { res, data: null };
      let text;
      try {
        text = await res.text();
      } catch (e) {
        if (res.ok || signal?.aborted) throw failed(e);
        return { res, data: null };
      }
      let data = null;
      try {
        data = JSON.parse(text);
      } catch {
        // A proxy's error page.
      }
      return { res, data };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', cancel);
    }
  }

  /** The ApiError of a response that is not 2xx (a 401 signs out). */
  refusal(res, data) {
    if (res.status === 401) this.onUnauthorized();
    const err = data && data.error;
    return new ApiError(res.status, err && err.code, err && err.message, retryAfterOf(res.status, res.headers.get('Retry-After'), err));
  }

  /**
   * The whole inbox: follows nextCursor for at most INBOX_PAGES pages.
   * chatd bounds no user's memberships, so the bound (kept against a
   * runaway server) may cut a real inbox short: the array answered then
   * has complete false, and what it does not list may still be the
   * user's (State.setInbox keeps what it holds). @param {Req} req
   */
  async inbox(req = {}) {
    const all = new Map();
    const read = async (cursor) => {
      const q = new URLSearchParams({ limit: '200' });
      if (cursor) q.set('cursor', cursor);
      const r = await this.request('GET', `/v1/inbox?${q}`, undefined, {}, req);
      for (const e of r.conversations) all.set(e.id, e);
      return r.nextCursor;
    };
    let cursor = await read('');
    let pages = 1;
    for (; cursor && pages < INBOX_PAGES; pages++) cursor = await read(cursor);
    // One that got a message while the later pages were read moved ahead
    // of them and is on none (docs/http.md): the first page, read again,
    // has it. Missing, it would be taken for a conversation the user left.
    if (pages > 1) await read('');
    const list = [...all.values()];
    list.complete = !cursor;
    return list;
  }

  /** @param {{beforeSeq?:number, afterSeq?:number, limit?:number}} q @param {Req} req */
  async history(cid, q = {}, req = {}) {
    const p = new URLSearchParams();
    for (const k of ['beforeSeq', 'afterSeq', 'limit']) if (q[k]) p.set(k, String(q[k]));
    const r = await this.request('GET', `/v1/conversations/${cid}/messages?${p}`, undefined, {}, req);
    return r.messages;
  }

  conversation(cid, req = {}) {
    return this.request('GET', `/v1/conversations/${cid}`, undefined, {}, req);
  }

  /** Answers the pair's one direct conversation, made or not: a repeat is harmless. */
  openDirect(peerId, req = {}) {
    return this.request('POST', `/v1/direct/${peerId}`, undefined, {}, { ...req, idempotent: true });
  }

  /** key: the create's Idempotency-Key (a UUID); a create repeated with it answers the group the first one made. */
  createGroup(title, members, key, req = {}) {
    return this.request('POST', '/v1/conversations', { type: 'group', title, members }, { 'Idempotency-Key': key }, req);
  }

  /** An add of a member already in answers as the first (200). */
  addMember(cid, userId, req = {}) {
    return this.request('POST', `/v1/conversations/${cid}/members`, { userId }, {}, { ...req, idempotent: true });
  }

  /** A read watermark only moves forward: a repeat changes nothing. */
  markRead(cid, seq, req = {}) {
    return this.request('POST', `/v1/conversations/${cid}/read`, { seq }, {}, { ...req, idempotent: true });
  }

  seen(cid, seq, req = {}) {
    return this.request('GET', `/v1/conversations/${cid}/messages/${seq}/seen`, undefined, {}, req);
  }

  // People and groups (docs/http.md "People and groups").

  me(req = {}) {
    return this.request('GET', '/v1/me', undefined, {}, req);
  }

  /** @param {{displayName:string, about?:string, avatarUrl?:string, avatarUploadId?:string}} p */
  setMe(p, req = {}) {
    return this.request('PUT', '/v1/me', p, {}, req);
  }

  setSettings(s, req = {}) {
    return this.request('PUT', '/v1/me/settings', s, {}, req);
  }

  /** The caller's mute settings of one conversation (push). */
  setConversationSettings(cid, s, req = {}) {
    return this.request('PUT', `/v1/conversations/${cid}/settings`, s, {}, req);
  }

  user(id, req = {}) {
    return this.request('GET', `/v1/users/${id}`, undefined, {}, req);
  }

  /**
   * Profiles of up to 100 ids, revalidated with the ETag of the previous
   * answer for the same ids: null when nothing changed (304).
   */
  async users(ids, etag, req = {}) {
    const headers = { Authorization: `Bearer ${this.token}` };
    if (etag) headers['If-None-Match'] = etag;
    const { res, data } = await this.exchange(`/v1/users?ids=${ids.join(',')}`, { method: 'GET', headers, cache: 'no-cache' }, req, true);
    if (res.status === 304) return null;
    if (!res.ok) throw this.refusal(res, data);
    return { users: data.users, etag: res.headers.get('ETag') };
  }

  block(id, req = {}) {
    return this.request('PUT', `/v1/me/blocks/${id}`, undefined, {}, req);
  }

  unblock(id, req = {}) {
    return this.request('DELETE', `/v1/me/blocks/${id}`, undefined, {}, req);
  }

  /**
   * Signs the user out everywhere: every token issued until now, this one
   * too. Not repeated on its own: a repeat revokes a token issued since.
   */
  revokeTokens(req = {}) {
    return this.request('POST', '/v1/me/tokens/revoke', undefined, {}, req);
  }

  blocks(req = {}) {
    return this.request('GET', '/v1/me/blocks', undefined, {}, req);
  }

  /** A rename (or any change) asking for what already is changes nothing: a repeat is harmless. */
  updateGroup(cid, changes, req = {}) {
    return this.request('PATCH', `/v1/conversations/${cid}`, changes, {}, { ...req, idempotent: true });
  }

  /** Every member (pages of 500), the owner first. */
  async members(cid, req = {}) {
    const all = [];
    let cursor = '';
    for (let page = 0; page < 20; page++) {
      const q = new URLSearchParams({ limit: '500' });
      if (cursor) q.set('cursor', cursor);
      const r = await this.request('GET', `/v1/conversations/${cid}/members?${q}`, undefined, {}, req);
      all.push(...r.members);
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    return all;
  }

  setRole(cid, userId, role, req = {}) {
    return this.request('PUT', `/v1/conversations/${cid}/members/${userId}/role`, { role }, {}, req);
  }

  /** A transfer repeated by the old owner answers as the first (204). */
  transferOwner(cid, userId, req = {}) {
    return this.request('POST', `/v1/conversations/${cid}/owner`, { userId }, {}, { ...req, idempotent: true });
  }

  removeMember(cid, userId, req = {}) {
    return this.request('DELETE', `/v1/conversations/${cid}/members/${userId}`, undefined, {}, req);
  }

  /** @param {{q:string, conversationId?:number, cursor?:string, limit?:number}} p */
  search(p, req = {}) {
    const q = new URLSearchParams({ q: p.q, limit: String(p.limit || 20) });
    if (p.conversationId) q.set('conversationId', String(p.conversationId));
    if (p.senderId) q.set('senderId', String(p.senderId));
    if (p.after) q.set('after', p.after);
    if (p.before) q.set('before', p.before);
    if (p.cursor) q.set('cursor', p.cursor);
    return this.request('GET', `/v1/search?${q}`, undefined, {}, req);
  }
}

/** The ApiError of a request whose answer is no longer wanted. */
function aborted() {
  return new ApiError(0, 'aborted', 'cancelled');
}

/**
 * Resolves after ms, calling tick(seconds left) now and once a second;
 * rejects with aborted() as soon as signal is aborted.
 */
export function pause(ms, signal, tick) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted());
    const end = Date.now() + ms;
    let ticker = 0;
    const show = () => {
      tick(Math.max(1, Math.ceil((end - Date.now()) / 1000)));
      ticker = setTimeout(show, ((end - Date.now()) % 1000) || 1000);
    };
    const done = () => {
      clearTimeout(timer);
      clearTimeout(ticker);
      signal?.removeEventListener('abort', stop);
    };
    const stop = () => {
      done();
      reject(aborted());
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal?.addEventListener('abort', stop);
    show();
  });
}
