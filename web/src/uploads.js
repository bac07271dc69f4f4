// Uploads and downloads of attachments (docs/protocol.md "Attachments").
// An upload is a ticket (POST /v1/uploads), the bytes (a PUT to the
// ticket's url, with progress: XMLHttpRequest, since fetch reports none)
// and, for an object store, its completion. Downloads are fetched with the
// bearer token and shown from blob: URLs, kept in a small cache.

import { ApiError, pause, retryAfterOf } from './api.js';
import { retryAfterDelay } from './retry.js';
import { uuid4 } from './uuid.js';
import { SessionMark, markSignedOut } from './signout.js';

/** What the browser calls a file's type, or the extension's guess. */
export function fileType(file) {
  if (file.type) return file.type;
  const ext = (file.name.split('.').pop() || '').toLowerCase();
  return (
    {
      md: 'text/markdown',
      csv: 'text/csv',
      txt: 'text/plain',
      opus: 'audio/ogg',
      m4a: 'audio/mp4',
      heic: 'image/heic',
    }[ext] || 'application/octet-stream'
  );
}

/**
 * Whether an attachment is shown as a picture: an image with a thumbnail,
 * or of a type every browser decodes. chatd makes no thumbnail of the
 * HEIC and HEIF photos iPhones take, which most browsers cannot show:
 * those are a file to download, not a broken picture.
 */
export function shownAsPicture(a) {
  if ((a.contentType || '').split('/')[0] !== 'image') return false;
  return Boolean(a.thumbnail) || ['image/jpeg', 'image/png', 'image/gif', 'image/webp', 'image/avif', 'image/bmp'].includes(a.contentType);
}

/**
 * Why chatd refuses an upload for a conversation (its ticket, its bytes
 * or their completion, docs/http.md) because the uploader may no longer
 * write there, by the code of its 403, in words rather than chatd's terse
 * "not a member of conversation 7".
 */
const REFUSALS = {
  not_member: 'You are no longer in this conversation (you left or were removed): the file cannot be sent here.',
  blocked: 'This person blocked you: you cannot send them files.',
};

/**
 * Whether an upload failed so for good: its uploader may no longer write
 * in the conversation (403), or chatd refuses the file itself (413 over a
 * size, pixel or daily limit that no wait lifts; 415 a type it does not
 * take). Sent again, it can only be refused the same way, so the tray
 * offers no Retry.
 */
export function refusedForGood(e) {
  return mayNoLongerWrite(e) || e?.status === 413 || e?.status === 415;
}

/** Whether an upload was refused with one of the REFUSALS. */
function mayNoLongerWrite(e) {
  return e?.status === 403 && Object.hasOwn(REFUSALS, e.code);
}

/** What the tray tells of an upload that failed so: a refusal's reason, or the failure's message. */
function refusal(e) {
  return mayNoLongerWrite(e) ? new ApiError(e.status, e.code, REFUSALS[e.code]) : e;
}

/** Whether an upload that failed so is still pending, to be sent again. */
function retriable(e) {
  return e.status === 0 || e.status >= 500 || e.status === 429 || e.code === 'aborted';
}

/**
 * What became of the upload u (GET /v1/uploads/{id}) of ticket t, whose
 * URL expired, for file: its attachment when it is complete with the file
 * (its size; of its declared type or, sniffed, another of its kind, as
 * chatd serves it), null when it is still pending (a new ticket takes the
 * file); otherwise it is no longer waiting to be sent (sent already,
 * recalled, an avatar), and a new upload of it is the user's call: an
 * error that says so (410, which keeps no ticket, so Retry uploads it
 * anew).
 */
function whatBecameOf(u, t, file, lead = 'The upload link expired and') {
  const gone = (why) => new ApiError(410, 'gone', `${lead} ${why}.`);
  switch (u?.state) {
    case 'pending':
      return null;
    case 'complete': {
      const a = u.attachment;
      if (!a) throw new ApiError(500, 'internal', 'the server did not return the attachment');
      if (a.size !== file.size || !sameKind(a.contentType, fileType(file))) {
        throw gone(`the server holds another file for it (${a.size} bytes of ${a.contentType}): Retry uploads this one anew`);
      }
      return a;
    }
    case 'attached':
      throw gone('the file was sent already, in a message: Retry uploads it anew');
    case 'recalled':
      throw gone('the file was sent and recalled since: Retry uploads it anew');
    case 'avatar':
    case 'released':
      throw gone('the file is (or was) an avatar: Retry uploads it anew');
    default:
      throw gone(`the upload ${t.uploadId} is ${u?.state || 'unknown'}: Retry uploads the file anew`);
  }
}

/**
 * Whether chatd may serve as served a file declared as declared: it
 * serves the declared type, or what the bytes are when their signature
 * names another type of the same kind (a PNG declared as image/jpeg),
 * never one of another kind.
 */
function sameKind(served, declared) {
  const d = (declared || '').split(';')[0].trim().toLowerCase();
  if (served === d) return true;
  const major = (x) => (x || '').split('/')[0];
  return major(served) === major(d) && !['application', 'text', ''].includes(major(d));
}

/**
 * The longest Retry-After (s) an upload waits out by itself: the upload
 * rate's and the PUTs running at once lift in seconds; the day's bytes,
 * refused until midnight UTC, are no wait to sit through.
 */
const UPLOAD_WAIT_S = 60;

/** Where UploadTickets keeps a user's tickets: PREFIX + user id + '/' + which upload. */
const TICKETS_PREFIX = 'chatd.uploads.';

/**
 * How long a ticket is kept after it was asked for (ms): chatd's default
 * upload_ttl, after which an upload never sent is deleted (its URL, its
 * key and any bytes it took with it). A page does not learn the server's
 * setting: a ticket kept longer is answered 404 (a new ticket then), one
 * forgotten sooner is uploaded anew. A ticket's expiresAt is not the
 * upload's end but its URL's (minutes): after it the upload is still
 * completed or read (Uploader.send), so it does not shorten this.
 */
export const TICKET_KEEP_MS = 24 * 60 * 60 * 1000;

/**
 * What tells a file picked again from the one picked before a reload: its
 * name, size, last modification and type, as the browser gives them. The
 * bytes are not read here: a file changed since mostly has another
 * lastModified (or size), and chatd refuses other bytes PUT to a complete
 * upload; one edited within the same second to the same size, whose kept
 * upload holds every byte of the one before, send finds out from the
 * upload's sha256 (sha256Of).
 */
function fingerprint(file) {
  return { name: file.name || '', size: file.size, lastModified: file.lastModified ?? 0, type: file.type || '' };
}

/**
 * The SHA-256 of file's bytes (hex), or null when this browser cannot tell
 * (no SubtleCrypto: an insecure origin; not a File).
 */
async function sha256Of(file) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle || typeof file?.arrayBuffer !== 'function') return null;
  try {
    const d = await subtle.digest('SHA-256', await file.arrayBuffer());
    return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, '0')).join('');
  } catch {
    return null; // unreadable (the file went since it was picked): chatd's checks stand
  }
}

/** Whether a and b (files, or fingerprints of them) are the same file as far as picking it again tells. */
export function sameFile(a, b) {
  a = fingerprint(a);
  b = fingerprint(b);
  return a.name === b.name && a.size === b.size && a.lastModified === b.lastModified && a.type === b.type;
}

/**
 * Entry e as kept (see UploadTickets), or null when it is not one this
 * page can go on with: storage is anyone's to write, and an entry of
 * another version or a corrupted one must not send a file to a URL it
 * does not name (a ticket without its url), nor keep one for ever (one
 * without a readable expiresAt would never be taken for expiring). A
 * ticket it cannot use is no ticket: its key, if any, asks for it again.
 */
function entryOf(e) {
  if (!e || typeof e !== 'object' || !Number.isSafeInteger(e.cid) || typeof e.at !== 'number') return null;
  const f = e.file;
  if (!f || typeof f !== 'object' || typeof f.name !== 'string' || !Number.isSafeInteger(f.size) || typeof f.lastModified !== 'number' || typeof f.type !== 'string') return null;
  const t = e.ticket;
  const usable =
    t &&
    typeof t === 'object' &&
    typeof t.uploadId === 'string' &&
    t.uploadId !== '' &&
    (t.url === undefined || (typeof t.url === 'string' && t.url !== '')) &&
    !Number.isNaN(Date.parse(t.expiresAt)) &&
    (t.completeUrl === undefined || typeof t.completeUrl === 'string') &&
    (t.method === undefined || typeof t.method === 'string') &&
    (t.headers === undefined || (t.headers !== null && typeof t.headers === 'object'));
  const ticketKey = typeof e.ticketKey === 'string' && e.ticketKey !== '' ? e.ticketKey : null;
  if (!usable && !ticketKey) return null;
  return { cid: e.cid, file: { name: f.name, size: f.size, lastModified: f.lastModified, type: f.type }, ticket: usable ? t : null, ticketKey, at: e.at, session: e.session };
}

/**
 * Ticket t as kept in storage: without the URL (and the method and
 * headers that go with it) when its key asks for it again (ticketKey;
 * chatd answers the same upload, its URL presigned again until the same
 * expiresAt, charged nothing), or once the URL expired, when no PUT may
 * go to it; a presigned URL is leave to write into the bucket, and the
 * browser's storage is readable by whatever runs on the origin for as
 * long as the entry is kept. The upload's id, expiry, completion and
 * whether every byte went are what a reload goes on from.
 */
function storedTicket(t, ticketKey, now) {
  if (!t) return null;
  if (!ticketKey && Date.parse(t.expiresAt) > now) return { ...t };
  const { url: _u, method: _m, headers: _h, ...rest } = t;
  return rest;
}

/**
 * The tray's tickets of user userId, kept in localStorage as the outbox
 * keeps unsent messages (store/outbox.js), so that a reload, a crashed tab
 * or a closed browser in the middle of an upload does not lose it: the
 * same file picked again for the same conversation goes on with the same
 * upload (Uploader.send, from its kept ticket and Idempotency-Key) rather
 * than a new one charged again against the day's bytes. An entry is
 * {cid, file: fingerprint, ticket, ticketKey, at, session}: at is when it
 * was made (TICKET_KEEP_MS), session the mark of the session that wrote
 * it (SessionMark: one a sign-out ended is neither read nor written). Entries are the user's alone: another user's are never
 * read, and go when someone else signs in here (forgetOthers). Each is
 * under a key of its own (keyOf), never in a list of them all: the tabs
 * of a browser share localStorage, and one tab's read and then write of a
 * key are not ordered against another's (each reads a copy of its own
 * that the other's writes reach later), so a list written back by two
 * tabs at once loses the entry of one.
 */
export class UploadTickets {
  /**
   * @param {number} userId
   * @param {Storage|null} storage
   * @param {() => number} now
   * @param {LockManager|null} locks the browser's Web Locks (claim)
   */
  constructor(userId, storage = globalThis.localStorage ?? null, now = () => Date.now(), locks = globalThis.navigator?.locks ?? null) {
    /** Where this user's entries are kept: one key each, PREFIX + user id + '/' + which upload. */
    this.prefix = `${TICKETS_PREFIX}${userId}/`;
    this.storage = storage;
    this.now = now;
    this.locks = locks;
    /**
     * This page's session of the user: the entries of one signed out
     * since (clearUser), which another tab of it not yet told may write
     * back after clearUser removed them, are neither kept nor read.
     */
    this.session = new SessionMark(userId, storage);
  }

  /**
   * Claims the upload of file for cid for this page until the returned
   * release() is called (the file sent, removed, or the tray cleared) or
   * the page goes (a reload, a closed or crashed tab: the browser ends
   * its locks); it resolves to null while another page of this browser
   * holds it. localStorage is every tab's: without the claim, the same
   * file picked in a second tab of the user would go on with the upload
   * the first is still PUTting or holds complete in its tray, and both
   * would send it (chatd refuses the second, 409 conflict). A browser
   * without Web Locks (an insecure origin) claims every upload.
   * @returns {Promise<(() => void)|null>}
   */
  claim(cid, file) {
    if (!this.locks) return Promise.resolve(() => {});
    const name = this.keyOf(cid, file);
    return new Promise((resolve) => {
      let release = () => {};
      const held = new Promise((r) => (release = r));
      this.locks
        .request(name, { ifAvailable: true }, (lock) => {
          if (!lock) {
            resolve(null);
            return undefined;
          }
          resolve(() => release());
          return held;
        })
        .catch(() => resolve(() => {})); // no lock to be had: as without Web Locks
    });
  }

  /**
   * Whether a page of this browser holds the upload of file for cid
   * (claim) now: this one's or another live tab's, which goes on with it
   * or holds it in its tray unsent. Asked of the browser's lock list
   * (locks.query), or else by trying the claim and letting it go at once.
   * Without Web Locks, none is.
   * @returns {Promise<boolean>}
   */
  async claimed(cid, file) {
    if (!this.locks) return false;
    const name = this.keyOf(cid, file);
    if (typeof this.locks.query === 'function') {
      try {
        const snapshot = await this.locks.query();
        return Boolean(snapshot?.held?.some((l) => l.name === name));
      } catch {
        // No list to be had: the claim tells.
      }
    }
    const release = await this.claim(cid, file);
    if (!release) return true;
    release();
    return false;
  }

  /**
   * Forgets the upload of file for cid unless another page claims it now
   * (it goes on with it there): resolves to whether it was forgotten.
   */
  async forgetUnclaimed(cid, file) {
    const release = await this.claim(cid, file);
    if (!release) return false;
    this.forget(cid, file);
    release();
    return true;
  }

  /** Where the upload of file for cid is kept: a key of its own (see UploadTickets). */
  keyOf(cid, file) {
    return this.prefix + JSON.stringify([cid, fingerprint(file)]);
  }

  /** Every kept ticket not past TICKET_KEEP_MS, oldest first. */
  list() {
    const keys = [];
    try {
      for (let i = 0; i < (this.storage?.length ?? 0); i++) {
        const k = this.storage.key(i);
        if (k && k.startsWith(this.prefix)) keys.push(k);
      }
    } catch {
      // Unavailable: nothing kept.
    }
    const live = [];
    for (const k of keys) {
      const e = this.read(k);
      if (e && k === this.keyOf(e.cid, e.file)) live.push(e);
      else this.remove(k);
    }
    return live.sort((a, b) => a.at - b.at);
  }

  /**
   * The entry kept under key k, or null (and it goes) when there is none
   * this page can use or it is past TICKET_KEEP_MS.
   */
  read(k) {
    let raw = null;
    let e = null;
    try {
      raw = this.storage?.getItem(k) ?? null;
      e = entryOf(JSON.parse(raw ?? 'null'));
    } catch {
      // Unreadable (or unavailable): nothing kept.
    }
    if (e && this.now() - e.at < TICKET_KEEP_MS && !this.session.signedOut(e.session)) {
      if (e.ticket?.url !== undefined && Date.parse(e.ticket.expiresAt) <= this.now()) {
        e.ticket = storedTicket(e.ticket, null, this.now());
        try {
          this.storage?.setItem(k, JSON.stringify(e));
        } catch {
          // Unavailable: read again next time.
        }
      }
      return e;
    }
    if (raw !== null) this.remove(k);
    return null;
  }

  /** The kept entry of file for conversation cid, or null. */
  find(cid, file) {
    return this.read(this.keyOf(cid, file));
  }

  /**
   * Keeps where the upload of file for cid stands: its ticket (null before
   * it came) and the Idempotency-Key of its ticket request. Neither (the
   * upload was refused, or its ticket is spent) forgets it.
   */
  keep(cid, file, ticket, ticketKey) {
    if (!ticket && !ticketKey) return this.forget(cid, file);
    // This page's session was signed out (in another tab): nothing more is its to keep.
    if (this.session.over()) return;
    const f = fingerprint(file);
    const was = this.find(cid, f);
    // A new key is a new upload: its time starts anew.
    const at = was && was.ticketKey === ticketKey ? was.at : this.now();
    const e = { cid, file: f, ticket: storedTicket(ticket, ticketKey, this.now()), ticketKey: ticketKey ?? null, at, session: this.session.mark };
    try {
      this.storage?.setItem(this.keyOf(cid, f), JSON.stringify(e));
    } catch {
      // Full or unavailable (a private window): the upload goes on from
      // this page, it just does not survive it.
    }
  }

  /** Forgets the upload of file for cid: sent in a message, removed from the tray, or refused. */
  forget(cid, file) {
    this.remove(this.keyOf(cid, file));
  }

  remove(k) {
    try {
      this.storage?.removeItem(k);
    } catch {
      // Unavailable: nothing was kept.
    }
  }

  /**
   * Signing out: user userId's tickets do not stay in the browser for the
   * next person, nor those another tab of the session writes back before
   * it is told (SessionMark).
   */
  static clearUser(userId, storage = globalThis.localStorage ?? null) {
    const mine = TICKETS_PREFIX + userId;
    forgetKeys(storage, (k) => k === mine || k.startsWith(`${mine}/`));
    markSignedOut(userId, storage);
  }

  /**
   * Signing in as userId: the tickets anyone else left here (a token that
   * expired while the browser was closed signs no one out) go, and those
   * of userId kept as another version did.
   */
  static forgetOthers(userId, storage = globalThis.localStorage ?? null) {
    const mine = `${TICKETS_PREFIX}${userId}/`;
    forgetKeys(storage, (k) => k.startsWith(TICKETS_PREFIX) && !k.startsWith(mine));
  }
}

/** Removes the keys of storage that gone(key) picks. */
function forgetKeys(storage, gone) {
  const keys = [];
  try {
    for (let i = 0; i < (storage?.length ?? 0); i++) {
      const k = storage.key(i);
      if (k && gone(k)) keys.push(k);
    }
    for (const k of keys) storage.removeItem(k);
  } catch {
    // Unavailable: nothing was kept.
  }
}

export class Uploader {
  /**
   * @param {import('./api.js').Api} api
   * @param {{userId?: number|null, storage?: Storage|null, locks?: LockManager|null}} [opts] whose
   *   uploads these are: with a userId, the tray's tickets are kept
   *   (UploadTickets) across a reload, each claimed by the page it goes
   *   on in (locks: the browser's Web Locks, see UploadTickets.claim)
   */
  constructor(api, { userId = null, storage = globalThis.localStorage ?? null, locks = globalThis.navigator?.locks ?? null } = {}) {
    this.api = api;
    /** @type {UploadTickets|null} */
    this.tickets = userId === null ? null : new UploadTickets(userId, storage, undefined, locks);
    // How many waits (see patiently in send) a step of an upload sits
    // through before it fails, Retry then the user's.
    this.busyWaits = 10;
    // An upload whose bytes (or answer) have not moved for this long is
    // given up as a network error, which the tray offers to retry: over a
    // connection that died without a reset, the request would otherwise
    // wait for many minutes at its percentage, holding the message back.
    this.stallMs = 30000;
  }

  /**
   * Uploads file for conversation cid; resolves with the attachment a
   * message will carry. onProgress(sent, total) follows the bytes;
   * abort() (returned in handle) stops it.
   */
  upload(cid, file, onProgress, handle = {}) {
    return this.send({ conversationId: cid }, file, onProgress, handle);
  }

  /**
   * Uploads a picture (JPEG, PNG, GIF or WebP) as an avatar upload, for
   * PUT /v1/me or PATCH /v1/conversations/{id} avatarUploadId; resolves
   * with its attachment (id: the upload id).
   */
  uploadAvatar(file, onProgress = () => {}, handle = {}) {
    return this.send({ purpose: 'avatar' }, file, onProgress, handle);
  }

  /**
   * An upload whose ticket asks for what (a conversation's, an avatar).
   * handle.ticket is kept for a retry: sent again after a network
   * failure (the answer of a PUT that got through may be what was lost),
   * the upload goes to the same ticket rather than ask for a new one,
   * charged again against the day's bytes. When every byte went to its
   * URL before (ticket.sent), what became of them is asked first, and
   * they go again only if they never arrived: an object store's are
   * completed (POST completeUrl, before or after expiresAt), chatd's
   * own read (GET). Otherwise they are PUT again, which chatd answers
   * as the first time until expiresAt. handle.ticketKey is the
   * ticket request's Idempotency-Key, one per file and ticket: a ticket
   * request that failed (its answer may have been lost while chatd made
   * the upload) is asked again with it, and chatd answers the upload the
   * first made, charged once; a new ticket (the first expired, or its
   * upload was refused) gets a new key. handle.onWait and handle.signal
   * are the ticket and completion requests' (api.js Req): a wait before
   * a retry (chatd busy) is told there, and an abort of signal is abort().
   * A step chatd answers "not now" (429, 503) with a Retry-After of at
   * most UPLOAD_WAIT_S, past what the Api waits for itself (its PUT, which
   * no Api sends; a ticket still refused after the Api's retries), is
   * done again after it, the wait told through onWait as the Api's.
   * handle.onTicket(ticket, ticketKey), when given, is told where the
   * upload stands at every change, for the tray to keep across a reload
   * (UploadTickets): the key before the ticket is asked for, the ticket
   * once it came and once every byte went (ticket.sent), the ticket sent
   * once the upload is complete, and nulls once the upload is refused or
   * its ticket spent. A cancelled upload tells nothing more.
   */
  send(what, file, onProgress, handle) {
    // abort() works from the start: before the ticket comes, it stops
    // the upload at the next step (no bytes sent, nothing completed).
    let aborted = false;
    const check = () => {
      if (aborted) throw new ApiError(0, 'aborted', 'upload cancelled');
    };
    const ctl = new AbortController();
    const req = { signal: ctl.signal, onWait: handle.onWait };
    handle.abort = () => {
      aborted = true;
      ctl.abort();
    };
    handle.signal?.addEventListener('abort', () => handle.abort());
    const kept = () => {
      if (!aborted) handle.onTicket?.(handle.ticket ?? null, handle.ticketKey ?? null);
    };
    // Complete: a page reloaded before the message went finds its bytes
    // there (a completion or read, never a second PUT or ticket).
    const keptDone = (t, key) => {
      if (!aborted) handle.onTicket?.({ ...t, sent: true }, key ?? null);
    };
    const refused = (e) => {
      throw what.conversationId ? refusal(e) : e;
    };
    const patiently = async (step) => {
      for (let waits = 1; ; waits++) {
        try {
          return await step();
        } catch (e) {
          const s = e.status === 429 || e.status === 503 ? e.retryAfter : 0;
          if (!s || s > UPLOAD_WAIT_S || waits > this.busyWaits) throw e;
          await pause(retryAfterDelay(s), ctl.signal, (left) => handle.onWait?.(left, e));
          handle.onWait?.(0, e);
        }
      }
    };
    // What became of the upload of ticket t after a PUT or completion
    // that may have got through, its answer lost: see whatBecameOf.
    const get = (t) =>
      patiently(() => this.api.request('GET', `/v1/uploads/${t.uploadId}`, undefined, {}, req)).catch((e) => {
        if (e.status === 404) return null; // pending, deleted after upload_ttl
        throw e;
      });
    const read = (t, lead) => get(t).then((u) => u && whatBecameOf(u, t, file, lead));
    // A completion sent again answers the same upload (docs/http.md).
    const complete = (t) => patiently(() => this.api.request('POST', t.completeUrl, undefined, {}, { ...req, idempotent: true }));
    // What became of the bytes of object-store ticket t, every one of
    // which went to its URL on a try before (t.sent), the store's answer
    // or the completion's lost: the completion, which chatd answers
    // after expiresAt too, completes them if they arrived, and otherwise
    // the upload stays pending (null: the file goes again). Never a
    // second PUT or ticket for bytes the bucket holds.
    const settle = async (t) => {
      let u;
      try {
        u = await complete(t);
      } catch (e) {
        if (e.status === 404 || e.status === 410) return null; // deleted after upload_ttl, bytes and all
        if (e.status !== 400) throw e;
        // 400: nothing under its URL (still pending: the bytes never
        // arrived), or bytes of another size, a refusal that deleted it,
        // or another completion of them took them (completedElsewhere).
        u = await completedElsewhere(t, e);
        if (u === null) return null;
      }
      return whatBecameOf(u, t, file, 'The upload was interrupted, and');
    };
    // The upload of ticket t, whose completion chatd answered 400 e
    // (nothing under its URL): null while it is pending; no longer
    // pending, the upload another completion of the same bytes made (the
    // first, whose answer was lost, still running on another node when
    // the one sent again looked, after it had taken the bytes), for
    // whatBecameOf to judge; e when it is gone (a refusal deleted it).
    const completedElsewhere = async (t, e) => {
      const u = await get(t);
      if (u?.state === 'pending') return null;
      if (!u) throw e;
      return u;
    };
    const expiring = (t) => Date.parse(t.expiresAt) - Date.now() < 30000;
    return (async () => {
      let t = handle.ticket;
      if (t && (t.sent || expiring(t))) {
        // A ticket kept from a failed try: its PUT may have stored the
        // file, and a new ticket would upload it again, charged again,
        // as would a PUT to it send the bytes again.
        let a;
        try {
          a = await (t.sent && t.completeUrl ? settle(t) : read(t, expiring(t) ? undefined : 'The upload was interrupted, and'));
        } catch (e) {
          if (!retriable(e)) {
            handle.ticket = handle.ticketKey = null;
            kept();
          }
          throw e;
        }
        // Complete with bytes that are not this file's: a file picked
        // again after a reload with the name, size, type and modification
        // time of the one before, edited within the second. It is
        // uploaded anew, and the kept upload is not sent for it.
        const other = a?.sha256 ? await sha256Of(file).then((h) => h !== null && h !== a.sha256) : false;
        check();
        if (other) {
          a = null;
          t = null;
          handle.ticket = handle.ticketKey = null;
          kept();
        }
        if (a) {
          keptDone(t, handle.ticketKey);
          handle.ticket = handle.ticketKey = null;
          onProgress(file.size, file.size);
          return a;
        }
        if (t) {
          t.sent = false; // they never arrived: they go again
          kept();
        }
      }
      // A ticket kept without its URL (UploadTickets) is asked again
      // with its key: the same upload, its URL given again.
      if (!t || expiring(t) || !t.url) {
        if (t && (expiring(t) || !handle.ticketKey)) handle.ticketKey = null; // expiring: a new ticket, a new key
        handle.ticket = null;
        handle.ticketKey ??= uuid4();
        kept();
        try {
          t = await patiently(() =>
            this.api.request(
              'POST',
              '/v1/uploads',
              { ...what, name: file.name || 'file', contentType: fileType(file), size: file.size },
              { 'Idempotency-Key': handle.ticketKey },
              req,
            ),
          );
        } catch (e) {
          // Only an answer that may have been lost keeps the key: a
          // refusal made nothing, and a key gone (its URL expired) is
          // spent, so sent again it would be refused for ever.
          if (!retriable(e)) {
            handle.ticketKey = null;
            kept();
          }
          throw e;
        }
        handle.ticket = t;
        kept();
      }
      check();
      try {
        // chatd's own path gets the bearer token; an object store's
        // address (or a scheme-relative //host, which browsers also read
        // from /\host) never does.
        const own = /^\/(?![/\\])/.test(t.url);
        // A PUT sent again answers as the first (docs/http.md), until the
        // URL expires: then chatd answers 410 whatever became of the
        // upload, complete already if an earlier PUT got through with its
        // answer lost.
        const put = await patiently(() => this.put(t, file, own, onProgress, handle, kept)).catch(async (e) => {
          if (!own || e.status !== 410) throw e;
          const a = await read(t);
          if (!a) throw new ApiError(410, 'gone', 'The upload link expired before the whole file arrived: Retry sends it again.');
          onProgress(file.size, file.size);
          return { attachment: a };
        });
        check();
        const u = t.completeUrl
          ? await complete(t).catch(async (e) => {
              if (e.status !== 400) throw e;
              const done = await completedElsewhere(t, e);
              if (done) return { attachment: whatBecameOf(done, t, file, 'The upload was interrupted, and') };
              // The store answered the PUT, yet chatd finds nothing under
              // its URL (a store that shows an object late): the ticket
              // is kept (a failure for now), and Retry completes the bytes
              // first (t.sent), PUTting them again only if they are still
              // not there, rather than a new ticket charged again.
              throw new ApiError(0, 'network', 'The file is not in the store yet: Retry completes it.');
            })
          : put;
        if (!u || !u.attachment) throw new ApiError(500, 'internal', 'the server did not return the attachment');
        keptDone(t, handle.ticketKey);
        return u.attachment;
      } catch (e) {
        // Only a failure that may leave the upload pending keeps its
        // ticket: a refusal deleted it, an expiry (gone) needs a new one.
        if (!retriable(e)) {
          handle.ticket = handle.ticketKey = null;
          kept();
        }
        throw e;
      }
    })().catch(refused);
  }

  /** PUTs file to ticket t; onSent() is told once every byte went (t.sent). */
  put(t, file, own, onProgress, handle, onSent = () => {}) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      const before = handle.abort;
      handle.abort = () => {
        before?.();
        xhr.abort();
      };
      let watchdog = 0;
      const moved = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => {
          reject(new ApiError(0, 'network', 'the upload stalled'));
          xhr.abort();
        }, this.stallMs);
      };
      xhr.onloadend = () => clearTimeout(watchdog);
      xhr.onprogress = moved; // the answer coming in
      xhr.open(t.method || 'PUT', t.url);
      for (const [k, v] of Object.entries(t.headers || {})) xhr.setRequestHeader(k, v);
      if (own) xhr.setRequestHeader('Authorization', `Bearer ${this.api.token}`);
      // Every byte went: whatever becomes of the answer, they may be
      // stored, and a retry asks before it sends them again (send).
      xhr.upload.onload = () => {
        t.sent = true;
        onSent();
      };
      xhr.upload.onprogress = (e) => {
        moved();
        onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
      };
      xhr.onload = () => {
        let data = null;
        try {
          data = JSON.parse(xhr.responseText);
        } catch {
          // An object store answers XML (or nothing).
        }
        if (xhr.status >= 200 && xhr.status < 300) {
          t.sent = true;
          onSent();
          onProgress(file.size, file.size);
          resolve(data);
          return;
        }
        if (xhr.status === 401 && own) this.api.onUnauthorized();
        if (!own && (xhr.status === 408 || /<Code>RequestTimeout<\/Code>/.test(xhr.responseText || ''))) {
          // The store gave up waiting for the bytes (S3 answers it 400):
          // the network's fault, and the same PUT to the same ticket goes
          // through on Retry, where a refusal would drop the ticket for a
          // new one, the file charged again against the day's bytes.
          reject(new ApiError(0, 'network', 'the connection was too slow for the file store'));
          return;
        }
        const err = data && data.error;
        const busy = xhr.status === 429 || xhr.status === 503;
        const wait = busy ? retryAfterOf(xhr.status, xhr.getResponseHeader('Retry-After'), err) : 0;
        reject(new ApiError(xhr.status, err ? err.code : xhr.status === 403 ? 'gone' : 'network', err ? err.message : `upload refused (${xhr.status})`, wait));
      };
      xhr.onerror = () => reject(new ApiError(0, 'network', 'the upload was cut off'));
      xhr.onabort = () => reject(new ApiError(0, 'aborted', 'upload cancelled'));
      xhr.send(file);
      moved();
    });
  }
}

/** The body of res as a Blob, calling moved() at every piece that comes. */
async function readBlob(res, moved) {
  if (!res.body) return res.blob();
  const parts = [];
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    moved();
  }
  return new Blob(parts, { type: res.headers.get('Content-Type') || '' });
}

/** How long an avatar answered 404 is not asked for again (ms). */
const AVATAR_404_FOR = 5 * 60 * 1000;

/**
 * How long an avatar whose download failed for now (the network, a 5xx,
 * a 429) is not asked for again (ms), unless its Retry-After says longer.
 */
const AVATAR_RETRY_FOR = 15 * 1000;

/**
 * The bytes of downloads BlobCache keeps as blob: URLs: a full-size photo
 * may be up to the upload limit (25 MiB), and a blob lives in the
 * browser's memory until revoked.
 */
export const BLOB_CACHE_BYTES = 64 * 1024 * 1024;

/**
 * Downloads shown as blob: URLs, at most max of them and maxBytes of
 * their bytes kept (the least recently used revoked; the one just
 * downloaded stays, whatever its size). A failed fetch is forgotten so a
 * later render tries again (avatars excepted: see avatar).
 */
export class BlobCache {
  constructor(api, max = 150, maxBytes = BLOB_CACHE_BYTES) {
    this.api = api;
    this.max = max;
    this.maxBytes = maxBytes;
    /** @type {Map<string, Promise<string>>} */
    this.urls = new Map();
    /** @type {Map<string, number>} the size of each download made (settled) */
    this.sizes = new Map();
    this.bytes = 0;
    /** @type {Map<string, {error: Error, until: number}>} avatars whose answer stands (avatar) */
    this.dead = new Map();
    /** @type {Set<string>} avatars without a thumbnail: their picture is shown */
    this.noThumb = new Set();
    this.closed = false;
    // A download whose answer has not moved for this long fails (ms).
    this.stallMs = 30000;
  }

  url(id, thumbnail = false) {
    const key = `${id}${thumbnail ? '/thumbnail' : ''}`;
    let p = this.urls.get(key);
    if (p) {
      this.urls.delete(key); // most recently used last
      this.urls.set(key, p);
      return p;
    }
    p = (async () => {
      // A download whose answer has not moved for stallMs is given up as a
      // network error (and forgotten: asked again), as the Uploader's: over
      // a connection that died without a reset it would wait for many
      // minutes, its picture blank and this promise kept.
      const ctl = new AbortController();
      let watchdog = 0;
      const moved = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => ctl.abort(), this.stallMs);
      };
      const lost = (e) => new ApiError(0, 'network', ctl.signal.aborted ? 'network error: the download stalled' : 'network error: ' + e.message);
      moved();
      try {
        let res;
        try {
          res = await fetch(`/v1/attachments/${key}`, { headers: { Authorization: `Bearer ${this.api.token}` }, signal: ctl.signal });
        } catch (e) {
          throw lost(e);
        }
        moved();
        // chatd refused the token (expired, revoked): signing in again is
        // all that helps, as after any other request. A 401 of the object
        // store chatd redirected to is not about the token.
        if (res.status === 401 && !res.redirected) this.api.onUnauthorized?.();
        if (!res.ok) {
          let data = null;
          try {
            data = await res.json();
          } catch {
            // An object store's error body.
          }
          throw new ApiError(res.status, data?.error?.code, data?.error?.message, retryAfterOf(res.status, res.headers.get('Retry-After'), data?.error));
        }
        let blob;
        try {
          blob = await readBlob(res, moved);
        } catch (e) {
          throw lost(e);
        }
        if (this.closed) throw new ApiError(0, 'aborted', 'signed out');
        const u = URL.createObjectURL(blob);
        // Evicted or forgotten while it downloaded: revoked as it lands
        // (drop), never counted.
        if (this.urls.get(key) === p) {
          this.sizes.set(key, blob.size);
          this.bytes += blob.size;
          this.trim(key);
        }
        return u;
      } finally {
        clearTimeout(watchdog);
      }
    })();
    p.catch(() => this.urls.get(key) === p && this.urls.delete(key));
    this.urls.set(key, p);
    this.trim(key);
    return p;
  }

  /** Revokes the least recently used downloads but keep until within max and maxBytes. */
  trim(keep) {
    for (const k of this.urls.keys()) {
      if (this.urls.size <= this.max && this.bytes <= this.maxBytes) return;
      if (k !== keep) this.drop(k);
    }
  }

  /** Forgets the download of key, revoking its blob: URL (once made). */
  drop(key) {
    const p = this.urls.get(key);
    if (!p) return;
    this.urls.delete(key);
    this.bytes -= this.sizes.get(key) || 0;
    this.sizes.delete(key);
    p.then((u) => URL.revokeObjectURL(u), () => {});
  }

  /**
   * A recalled message's files (their ids): their pictures and
   * thumbnails go from memory now, rather than when evicted.
   */
  forget(ids) {
    for (const id of ids) {
      this.drop(id);
      this.drop(`${id}/thumbnail`);
    }
  }

  /**
   * An avatar chatd keeps (docs/http.md "Avatars"): a blob: URL of its
   * thumbnail, else of the picture (a thumbnail not made). Views are built
   * again at every event, so what will not change is remembered rather
   * than asked again each time: a released avatar (410) for good, one the
   * user may not see (404) for a few minutes (they may share a
   * conversation again), and an avatar without a thumbnail shows its
   * picture from then on. A network error, a 5xx or a 429 is asked again
   * after AVATAR_RETRY_FOR, or the Retry-After if longer: asked at every
   * render, a few rows' avatars would spend the user's whole API bucket
   * (docs/http.md "Rate limits") while chatd is busy.
   */
  avatar(id) {
    const dead = this.dead.get(id);
    if (dead && dead.until > Date.now()) return Promise.reject(dead.error);
    const settled = (e) => {
      if (e?.status === 410) this.dead.set(id, { error: e, until: Infinity });
      else if (e?.status === 404) this.dead.set(id, { error: e, until: Date.now() + AVATAR_404_FOR });
      else if (e?.code !== 'aborted') this.dead.set(id, { error: e, until: Date.now() + Math.max(AVATAR_RETRY_FOR, (e?.retryAfter || 0) * 1000) });
      throw e;
    };
    if (this.noThumb.has(id)) return this.url(id).catch(settled);
    return this.url(id, true).catch((e) => {
      // Only a thumbnail not made is worth asking the picture for now.
      if (e?.status !== 404) return settled(e);
      this.noThumb.add(id);
      return this.url(id).catch(settled);
    });
  }

  /**
   * Signing out: every blob: URL made is revoked (the downloads of the
   * user who leaves are no longer reachable from this page), and one
   * still downloading is never made.
   */
  clear() {
    this.closed = true;
    for (const p of this.urls.values()) p.then((u) => URL.revokeObjectURL(u), () => {});
    this.urls.clear();
    this.sizes.clear();
    this.bytes = 0;
    this.dead.clear();
    this.noThumb.clear();
  }
}
