// Who people are: display names and avatars of the users the signed-in
// user shares conversations with. History, the inbox and events name people
// by id; this cache resolves them with GET /v1/users?ids= (batches of up
// to 100, revalidated by ETag) and keeps them current from profile.updated.
// Pure data and fetches: no DOM.

const BATCH = 100;

/**
 * An updatedAt (RFC 3339, UTC, up to nanoseconds) as [ms, nanoseconds
 * within the ms], comparable where Date.parse keeps milliseconds only:
 * two writes of one profile are microseconds apart at least. Null when
 * absent (a profile never set).
 */
function stamp(s) {
  const m = typeof s === 'string' && /^(.*?)(?:\.(\d{1,9}))?Z$/.exec(s);
  if (!m) return null;
  const ms = Date.parse(`${m[1]}Z`);
  if (Number.isNaN(ms)) return null;
  const ns = Number((m[2] || '').padEnd(9, '0'));
  return [ms + Math.floor(ns / 1e6), ns % 1e6];
}

/** Whether profile p was written before held (both from chatd). */
function older(p, held) {
  const a = stamp(p?.updatedAt);
  const b = stamp(held?.updatedAt);
  return !!a && !!b && (a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]));
}

/**
 * Whether display name n of user uid reads as a label the page itself
 * gives: "You" (the signed-in user: "You: …" in the inbox, "You removed
 * …" in a notice) or "User <id>" of another user (someone without a
 * name). Compared without case, width (NFKC), invisible formatting
 * characters and repeated spaces, all of which chatd lets a name hold.
 */
function posesAsLabel(n, uid) {
  const k = n.normalize('NFKC').replace(/\p{Cf}/gu, '').replace(/\s+/g, ' ').trim().toLowerCase();
  const m = /^user ?([0-9]+)$/.exec(k);
  return k === 'you' || (m !== null && m[1] !== String(uid));
}

export class People extends EventTarget {
  /** @param {import('../api.js').Api} api @param {number} me */
  constructor(api, me) {
    super();
    this.api = api;
    this.me = me;
    /** @type {Map<number, {id:number, displayName:string, avatar:string|null, about:string, updatedAt?:string}>} */
    this.profiles = new Map();
    this.settings = { readReceipts: true, presence: true };
    this.wanted = new Set();
    this.timer = 0;
    this.etags = new Map(); // batch key -> ETag
    this.released = new Set(); // avatars found released (stale)
  }

  /**
   * The name to show for uid ("You" for the signed-in user). Someone
   * else's name that reads as a label the page gives (posesAsLabel) is
   * followed by their id.
   */
  name(uid, { you = true } = {}) {
    if (uid === this.me && you) return 'You';
    const p = this.profiles.get(uid);
    if (p && p.displayName) return uid !== this.me && posesAsLabel(p.displayName, uid) ? `${p.displayName} (user ${uid})` : p.displayName;
    if (!p) this.want(uid);
    return `User ${uid}`;
  }

  avatar(uid) {
    const p = this.profiles.get(uid);
    if (!p) this.want(uid);
    return (p && p.avatar) || null;
  }

  profile(uid) {
    if (!this.profiles.has(uid)) this.want(uid);
    return this.profiles.get(uid) || null;
  }

  /** Queues uid for the next batch (a few ms later, many at once). */
  want(uid) {
    if (!uid || this.wanted.has(uid)) return;
    this.wanted.add(uid);
    if (!this.timer) this.timer = setTimeout(() => this.flush(), 20);
  }

  async flush() {
    this.timer = 0;
    const ids = [...this.wanted].sort((a, b) => a - b);
    this.wanted.clear();
    for (let i = 0; i < ids.length; i += BATCH) await this.fetchBatch(ids.slice(i, i + BATCH));
  }

  async fetchBatch(ids) {
    const key = ids.join(',');
    // A 304 says that what we hold is current: only worth asking for when
    // we hold every one of them.
    const etag = ids.every((id) => this.profiles.has(id)) ? this.etags.get(key) : undefined;
    try {
      const r = await this.api.users(ids, etag);
      if (!r) return; // 304: what we hold is current
      this.etags.set(key, r.etag);
      for (const id of ids) if (!this.profiles.has(id)) this.profiles.set(id, { id, displayName: '', avatar: null, about: '' });
      // One a profile.updated brought while this answer was on its way
      // is newer: it stays.
      for (const p of r.users) if (!older(p, this.profiles.get(p.id))) this.profiles.set(p.id, p);
      this.changed();
    } catch {
      // The names we know stay (a refresh on a flaky network); those we
      // do not are "User N" until their next mention asks again.
    }
  }

  /**
   * uid's avatar was found released (410): the profile held is stale, so
   * it is asked for again, once per avatar (every render of it reports it).
   */
  stale(uid, avatar) {
    if (this.released.has(avatar) || this.profiles.get(uid)?.avatar !== avatar) return;
    this.released.add(avatar);
    this.want(uid);
  }

  /** Refetches everyone we know (after a reconnect: updates may be missed). */
  refresh() {
    for (const id of this.profiles.keys()) this.want(id);
  }

  /** req: the options of the request (api.js Req). */
  async loadMe(req = {}) {
    const me = await this.api.me(req);
    this.settings = me.settings;
    this.profiles.set(this.me, { id: me.id, displayName: me.displayName, avatar: me.avatar, about: me.about });
    this.changed();
    return me;
  }

  /** A profile.updated event. */
  apply(ev) {
    const p = { id: ev.userId, displayName: ev.displayName || '', avatar: ev.avatar || null, about: ev.about || '', updatedAt: ev.updatedAt };
    if (older(p, this.profiles.get(ev.userId))) return; // delivered late (another node's, say)
    this.profiles.set(ev.userId, p);
    this.etags.clear();
    this.changed();
  }

  async saveProfile(p, req = {}) {
    const saved = await this.api.setMe(p, req);
    this.profiles.set(this.me, saved);
    this.changed();
    return saved;
  }

  async saveSettings(s, req = {}) {
    this.settings = await this.api.setSettings(s, req);
    this.changed();
    return this.settings;
  }

  changed() {
    this.dispatchEvent(new CustomEvent('change'));
  }
}
