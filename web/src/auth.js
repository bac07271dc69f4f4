// Sign-in state: the JWT lives in localStorage so a reload stays signed in.
// The page only reads the token's `sub` and `exp` to know who it is; the
// server verifies the signature on every request and connection.

const TOKEN_KEY = 'chatd.token';
const CLIENT_KEY = 'chatd.clientSuffixes';

/** Decodes a JWT's payload without verifying it (the server does). */
export function parseToken(token) {
  const parts = String(token).trim().split('.');
  if (parts.length !== 3) throw new Error('This is not a JWT (three dot-separated parts).');
  let payload;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const json = new TextDecoder().decode(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)));
    payload = JSON.parse(json);
  } catch {
    throw new Error('The token payload is not valid base64url JSON.');
  }
  // Same rule as the server: sub is a canonical positive decimal.
  if (typeof payload.sub !== 'string' || !/^[1-9][0-9]{0,15}$/.test(payload.sub)) {
    throw new Error('The token has no usable user id (sub).');
  }
  const userId = Number(payload.sub);
  if (!Number.isSafeInteger(userId)) throw new Error('The user id is too large for this client.');
  const exp = typeof payload.exp === 'number' ? payload.exp * 1000 : 0;
  if (!exp) throw new Error('The token has no expiry (exp); chatd requires one.');
  if (exp <= Date.now()) throw new Error('The token has expired.');
  return { token: parts.join('.'), userId, exp };
}

export function loadSignIn() {
  const t = localStorage.getItem(TOKEN_KEY);
  if (!t) return null;
  try {
    return parseToken(t);
  } catch {
    localStorage.removeItem(TOKEN_KEY);
    return null;
  }
}

export function saveSignIn(token) {
  const s = parseToken(token);
  localStorage.setItem(TOKEN_KEY, s.token);
  return s;
}

export function clearSignIn() {
  localStorage.removeItem(TOKEN_KEY);
}

/**
 * Calls fn(signIn or null) whenever another tab of this browser changes
 * the stored sign-in (signs out, or in as someone); returns the function
 * that stops watching.
 */
export function watchSignIn(fn) {
  const onStorage = (e) => {
    if (e.storageArea === localStorage && (e.key === TOKEN_KEY || e.key === null)) fn(loadSignIn());
  };
  window.addEventListener('storage', onStorage);
  return () => window.removeEventListener('storage', onStorage);
}

/** Development mode only: POST /dev/token mints a token for any user. */
export async function devToken(userId) {
  const res = await fetch('/dev/token', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ userId }),
  });
  const data = await res.json().catch(() => null);
  if (!res.ok || !data || !data.token) {
    throw new Error((data && data.error && data.error.message) || `dev sign-in failed (HTTP ${res.status})`);
  }
  return data.token;
}

function randomHex(bytes) {
  const a = crypto.getRandomValues(new Uint8Array(bytes));
  return [...a].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function storedSuffixes() {
  let suffixes = [];
  try {
    suffixes = JSON.parse(localStorage.getItem(CLIENT_KEY) || '[]');
  } catch {
    suffixes = [];
  }
  return Array.isArray(suffixes) ? suffixes : [];
}

/**
 * Picks the MQTT client id: web-<uid>-<suffix>. The suffix persists in
 * localStorage so a reload resumes the same persistent session (the server
 * replays what was missed). Two tabs of one browser must not share an id:
 * each would take the session over from the other in a reconnect loop. A
 * Web Lock held for the tab's lifetime claims a suffix; a second tab finds
 * it taken and claims (or creates) another. fresh: a new suffix, none of
 * those stored (the server refused this tab's id, forgetClientId).
 */
export async function claimClientId(userId, { fresh = false } = {}) {
  const suffixes = storedSuffixes();
  const locks = typeof navigator !== 'undefined' && navigator.locks;
  if (!locks) {
    // No Web Locks (not a secure context): one id per browser.
    if (fresh || !suffixes.length) suffixes.unshift(randomHex(6));
    localStorage.setItem(CLIENT_KEY, JSON.stringify(suffixes.slice(0, 8)));
    return `web-${userId}-${suffixes[0]}`;
  }
  for (const s of [...(fresh ? [] : suffixes), randomHex(6)]) {
    if (await tryHold(locks, clientLockName(userId, s))) {
      if (!suffixes.includes(s)) suffixes.push(s);
      localStorage.setItem(CLIENT_KEY, JSON.stringify(suffixes.slice(-8)));
      return `web-${userId}-${s}`;
    }
  }
  return `web-${userId}-${randomHex(6)}`;
}

/**
 * The server refused client id web-<userId>-<suffix> (another user's
 * session holds it): no later page claims its suffix again.
 */
export function forgetClientId(clientId) {
  const m = /^web-[^-]+-([^-]+)$/.exec(clientId);
  if (!m) return;
  try {
    const suffixes = storedSuffixes();
    if (suffixes.includes(m[1])) localStorage.setItem(CLIENT_KEY, JSON.stringify(suffixes.filter((s) => s !== m[1])));
  } catch {
    // Storage unavailable: a later page may try the suffix again, and
    // be refused again.
  }
}

/**
 * Lets go of the Web Lock this page holds on clientId (claimClientId),
 * once it uses another: what is left under it is another page's to take.
 */
export function releaseClientId(clientId) {
  const m = /^web-([^-]+)-([^-]+)$/.exec(clientId);
  if (!m) return;
  const name = clientLockName(m[1], m[2]);
  held.get(name)?.();
  held.delete(name);
}

/**
 * The client ids one tab claimed (claimClientId), by user: signed out and
 * in again in the same tab, the user goes on with the one they had, and
 * its persistent session. main.js keeps one for its page.
 */
export class TabClientIds {
  constructor() {
    /** @type {Map<number, string>} */
    this.ids = new Map();
  }

  /** User userId's client id in this tab: the one claimed before, or a new claim. */
  async claim(userId) {
    if (!this.ids.has(userId)) this.ids.set(userId, await claimClientId(userId));
    return this.ids.get(userId);
  }

  /**
   * CONNACK 0x85 on refused (another user's session holds it): a new id
   * of this tab's own, claimed as the first was (no other tab has it).
   * moved(id) is called before refused's lock goes: what waits unsent
   * under it moves first, and no later page picks it.
   */
  async renew(userId, refused, moved = () => {}) {
    forgetClientId(refused);
    const id = await claimClientId(userId, { fresh: true });
    moved(id);
    if (this.ids.get(userId) === refused) this.ids.set(userId, id);
    releaseClientId(refused);
    return id;
  }

  /**
   * The session of userId stopped for good on refused, refused too
   * (MqttSession forgetClientId): no later page claims it, nor this tab
   * when the user signs in here again (its first CONNECT refused again).
   */
  forget(userId, refused) {
    forgetClientId(refused);
    if (this.ids.get(userId) === refused) this.ids.delete(userId);
  }

  /**
   * The session of userId that connected with clientId ended in this tab
   * (signed out): an id the tab no longer uses for the user (forget) is
   * let go, and what is left unsent under it is the next page's to take
   * (Outbox.adoptOrphans), this tab's own signed in again too. An id the
   * tab goes on with stays held.
   */
  release(userId, clientId) {
    if (this.ids.get(userId) !== clientId) releaseClientId(clientId);
  }
}

/**
 * The Web Lock an open tab holds on client id web-<userId>-<suffix>: free,
 * the tab is gone and its outbox is for another page to send (outbox.js).
 */
export function clientLockName(userId, suffix) {
  return `chatd-client-${userId}-${suffix}`;
}

// The locks tryHold holds, by name: each one's release.
const held = new Map();

/**
 * Holds the named lock until the page goes away (or releaseClientId), if
 * it is free now.
 */
function tryHold(locks, name) {
  return new Promise((resolve) => {
    locks
      .request(name, { ifAvailable: true }, (lock) => {
        resolve(Boolean(lock));
        if (!lock) return undefined;
        // Released when the tab closes, or by releaseClientId.
        return new Promise((release) => held.set(name, release));
      })
      .catch(() => resolve(false));
  });
}

// The longest delay setTimeout takes: a longer one fires at once.
const MAX_DELAY = 2 ** 31 - 1; // ms, 24.8 days

/**
 * Calls fn at time at (ms since the epoch), however far away: a time
 * beyond one setTimeout's reach is waited for in steps. Returns the
 * function that cancels it.
 */
export function callAt(at, fn) {
  let t;
  const arm = () => {
    const left = at - Date.now();
    t = left > MAX_DELAY ? setTimeout(arm, MAX_DELAY) : setTimeout(fn, Math.max(0, left));
  };
  arm();
  return () => clearTimeout(t);
}
