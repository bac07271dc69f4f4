// HTTP API client (docs/http.md). Same origin, Bearer JWT; every failure
// becomes an ApiError carrying the server's error code so callers branch on
// `code`, never on message text.

import { retryAfterSeconds } from './retry.js';

export class ApiError extends Error {
  /**
   * retryAfter: the seconds a 429 asks to wait (Retry-After), 0 if none.
   * A 429 without the server's message (a proxy's) says it in words.
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

/** The retryAfter of a 429: its Retry-After header (delay-seconds), else its error body's. */
function retryAfterOf(status, header, err) {
  if (status !== 429) return 0;
  return retryAfterSeconds(header) || retryAfterSeconds(err?.retryAfter);
}

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
  }

  async request(method, path, body, extraHeaders = {}) {
    const headers = { ...extraHeaders, Authorization: `Bearer ${this.token}` };
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const { res, data } = await this.fetchJSON(path, init);
    if (res.status === 204) return null;
    if (!res.ok) throw this.refusal(res, data);
    return data;
  }

  /**
   * fetch within timeoutMs, the JSON body read: {res, data}. data is null
   * for 204, 304 and a body that is not JSON (a proxy's HTML error page);
   * a 2xx whose body cannot be read (cut off) fails as a network error.
   */
  async fetchJSON(path, init) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.timeoutMs);
    const failed = (e) => new ApiError(0, 'network', ctl.signal.aborted ? 'network error: no answer in time' : 'network error: ' + e.message);
    try {
      let res;
      try {
        res = await fetch(path, { ...init, signal: ctl.signal });
      } catch (e) {
        throw failed(e);
      }
      if (res.status === 204 || res.status === 304) return { res, data: null };
      let text;
      try {
        text = await res.text();
      } catch (e) {
        if (res.ok) throw failed(e);
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
    }
  }

  /** The ApiError of a response that is not 2xx (a 401 signs out). */
  refusal(res, data) {
    if (res.status === 401) this.onUnauthorized();
    const err = data && data.error;
    return new ApiError(res.status, err && err.code, err && err.message, retryAfterOf(res.status, res.headers.get('Retry-After'), err));
  }

  /** The whole inbox: follows nextCursor (bounded, for a runaway server). */
  async inbox() {
    const all = [];
    let cursor = '';
    for (let page = 0; page < 50; page++) {
      const q = new URLSearchParams({ limit: '200' });
      if (cursor) q.set('cursor', cursor);
      const r = await this.request('GET', `/v1/inbox?${q}`);
      all.push(...r.conversations);
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    return all;
  }

  /** @param {{beforeSeq?:number, afterSeq?:number, limit?:number}} q */
  async history(cid, q = {}) {
    const p = new URLSearchParams();
    for (const k of ['beforeSeq', 'afterSeq', 'limit']) if (q[k]) p.set(k, String(q[k]));
    const r = await this.request('GET', `/v1/conversations/${cid}/messages?${p}`);
    return r.messages;
  }

  conversation(cid) {
    return this.request('GET', `/v1/conversations/${cid}`);
  }

  openDirect(peerId) {
    return this.request('POST', `/v1/direct/${peerId}`);
  }

  /** key: the create's Idempotency-Key (a UUID); a create repeated with it answers the group the first one made. */
  createGroup(title, members, key) {
    return this.request('POST', '/v1/conversations', { type: 'group', title, members }, { 'Idempotency-Key': key });
  }

  addMember(cid, userId) {
    return this.request('POST', `/v1/conversations/${cid}/members`, { userId });
  }

  markRead(cid, seq) {
    return this.request('POST', `/v1/conversations/${cid}/read`, { seq });
  }

  seen(cid, seq) {
    return this.request('GET', `/v1/conversations/${cid}/messages/${seq}/seen`);
  }

  // People and groups (docs/http.md "People and groups").

  me() {
    return this.request('GET', '/v1/me');
  }

  /** @param {{displayName:string, about?:string, avatarUrl?:string, avatarUploadId?:string}} p */
  setMe(p) {
    return this.request('PUT', '/v1/me', p);
  }

  setSettings(s) {
    return this.request('PUT', '/v1/me/settings', s);
  }

  /** The caller's mute settings of one conversation (push). */
  setConversationSettings(cid, s) {
    return this.request('PUT', `/v1/conversations/${cid}/settings`, s);
  }

  user(id) {
    return this.request('GET', `/v1/users/${id}`);
  }

  /**
   * Profiles of up to 100 ids, revalidated with the ETag of the previous
   * answer for the same ids: null when nothing changed (304).
   */
  async users(ids, etag) {
    const headers = { Authorization: `Bearer ${this.token}` };
    if (etag) headers['If-None-Match'] = etag;
    const { res, data } = await this.fetchJSON(`/v1/users?ids=${ids.join(',')}`, { headers, cache: 'no-cache' });
    if (res.status === 304) return null;
    if (!res.ok) throw this.refusal(res, data);
    return { users: data.users, etag: res.headers.get('ETag') };
  }

  block(id) {
    return this.request('PUT', `/v1/me/blocks/${id}`);
  }

  unblock(id) {
    return this.request('DELETE', `/v1/me/blocks/${id}`);
  }

  /** Signs the user out everywhere: every token issued until now, this one too. */
  revokeTokens() {
    return this.request('POST', '/v1/me/tokens/revoke');
  }

  blocks() {
    return this.request('GET', '/v1/me/blocks');
  }

  updateGroup(cid, changes) {
    return this.request('PATCH', `/v1/conversations/${cid}`, changes);
  }

  /** Every member (pages of 500), the owner first. */
  async members(cid) {
    const all = [];
    let cursor = '';
    for (let page = 0; page < 20; page++) {
      const q = new URLSearchParams({ limit: '500' });
      if (cursor) q.set('cursor', cursor);
      const r = await this.request('GET', `/v1/conversations/${cid}/members?${q}`);
      all.push(...r.members);
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    return all;
  }

  setRole(cid, userId, role) {
    return this.request('PUT', `/v1/conversations/${cid}/members/${userId}/role`, { role });
  }

  transferOwner(cid, userId) {
    return this.request('POST', `/v1/conversations/${cid}/owner`, { userId });
  }

  removeMember(cid, userId) {
    return this.request('DELETE', `/v1/conversations/${cid}/members/${userId}`);
  }

  /** @param {{q:string, conversationId?:number, cursor?:string, limit?:number}} p */
  search(p) {
    const q = new URLSearchParams({ q: p.q, limit: String(p.limit || 20) });
    if (p.conversationId) q.set('conversationId', String(p.conversationId));
    if (p.cursor) q.set('cursor', p.cursor);
    return this.request('GET', `/v1/search?${q}`);
  }
}
