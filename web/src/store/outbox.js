// Own sends, edits, recalls and reactions the server has not answered yet,
// kept in localStorage under the tab's MQTT client id, in the order they
// were made: one made just before the tab went away (a phone's browser
// discards a background tab, a reload while "Sending…") is sent again,
// with its clientMsgId, when the page comes back, and chatd commits it once
// however many attempts reach it (docs/protocol.md "Send outcomes",
// "Message lifecycle"). mqtt.js's own queue of unacknowledged publishes
// lives in the page's memory and goes with it.

import { clientLockName } from '../auth.js';
import { SessionMark, markSignedOut } from '../signout.js';

const PREFIX = 'chatd.outbox.';

/**
 * The changes kept besides sends (entries without op), by their MQTT topic,
 * with what makes one well-formed. A reaction is kept as the state it sets
 * (on), never as a toggle: sent again, it cannot undo itself.
 */
const CHANGES = {
  edit: (e) => typeof e.body === 'string',
  recall: () => true,
  react: (e) => typeof e.emoji === 'string' && typeof e.on === 'boolean',
};

function valid(e) {
  if (!e || !Number.isSafeInteger(e.cid) || typeof e.clientMsgId !== 'string') return false;
  if (e.op === undefined) return typeof e.body === 'string';
  return Object.hasOwn(CHANGES, e.op) && Number.isSafeInteger(e.seq) && CHANGES[e.op](e);
}

export class Outbox {
  /**
   * @param {string} clientId the tab's MQTT client id (web-<uid>-<suffix>):
   *   one outbox per tab, so two open tabs never send each other's messages
   * @param {Storage|null} storage
   */
  constructor(clientId, storage = globalThis.localStorage ?? null) {
    this.clientId = clientId;
    this.key = PREFIX + clientId;
    this.storage = storage;
    const m = /^web-([^-]+)-/.exec(clientId);
    /**
     * This page's session of the user: what a session signed out since
     * (clearUser) wrote, which another tab of it not yet told may write
     * back after clearUser removed it, is neither sent nor kept.
     */
    this.session = new SessionMark(m ? m[1] : null, storage);
  }

  /** Entries of a kept list this session may send: well-formed, of no session signed out since. */
  usable(v) {
    return Array.isArray(v) ? v.filter((e) => valid(e) && !this.session.signedOut(e.session)) : [];
  }

  /**
   * Before the resend on load: takes over the outboxes of this user's tabs
   * that are gone (their client id's Web Lock is free), so what was written
   * is sent whichever tab comes back, and whatever suffix it gets (two tabs
   * were open and only one comes back, the suffix list dropped the id).
   * Their entries join ours in the order they were made (createdAt), once
   * per clientMsgId, and their keys go. A live tab's outbox (its lock held)
   * is left alone. Each lock is held while its outbox moves, so a page
   * claiming that id meanwhile finds either all of it or nothing.
   * Without Web Locks every tab of the browser has the same id: any other
   * id's outbox is from a page that is gone.
   * @param {LockManager|null} locks
   */
  async adoptOrphans(locks = globalThis.navigator?.locks ?? null) {
    const m = /^web-([^-]+)-([^-]+)$/.exec(this.clientId);
    if (!m) return;
    const mine = `${PREFIX}web-${m[1]}-`;
    for (const k of keysOf(this.storage)) {
      if (!k.startsWith(mine) || k === this.key) continue;
      if (!locks) {
        this.take(k);
        continue;
      }
      try {
        await locks.request(clientLockName(m[1], k.slice(mine.length)), { ifAvailable: true }, (lock) => {
          if (lock) this.take(k);
        });
      } catch {
        // Web Locks refused (storage access denied): left for its own tab.
      }
    }
  }

  /**
   * The tab connects with clientId from now on (the server refused the
   * one before): what is kept under the old one moves with it, in its
   * order. Nothing is sent again for that: what this page published is
   * still queued in mqtt.js, and goes out once, on the new connection.
   */
  moveTo(clientId) {
    const old = this.key;
    this.clientId = clientId;
    this.key = PREFIX + clientId;
    if (old !== this.key) this.take(old);
  }

  /** Moves the entries kept under key into this outbox. */
  take(key) {
    if (this.session.over()) return;
    let theirs;
    try {
      theirs = this.usable(JSON.parse(this.storage.getItem(key) || '[]'));
    } catch {
      theirs = [];
    }
    const all = this.list();
    const have = new Set(all.map((e) => e.clientMsgId));
    for (const e of theirs) {
      if (have.has(e.clientMsgId)) continue;
      have.add(e.clientMsgId);
      all.push(e);
    }
    // Stable: entries made at the same moment keep their outbox's order.
    const at = (e) => Date.parse(e.createdAt) || 0;
    all.sort((a, b) => at(a) - at(b));
    this.save(all);
    try {
      this.storage.removeItem(key);
    } catch {
      // Unavailable: nothing was read from it either.
    }
  }

  /**
   * Sends have no op; changes have op (their topic) and seq (their target).
   * @returns {{cid:number, clientMsgId:string, op?:'edit'|'recall'|'react', seq?:number, body?:string,
   *   emoji?:string, on?:boolean, attachments?:any[], replyTo?:any, createdAt:string}[]} oldest first
   */
  list() {
    try {
      return this.usable(JSON.parse(this.storage?.getItem(this.key) || '[]'));
    } catch {
      return [];
    }
  }

  /** Keeps pending send p of conversation cid until the server answers it. */
  put(cid, p) {
    const e = { cid, clientMsgId: p.clientMsgId, body: p.body, createdAt: p.createdAt };
    if (p.attachments && p.attachments.length) e.attachments = p.attachments;
    if (p.replyTo) e.replyTo = p.replyTo;
    this.keep(e);
  }

  /**
   * Keeps change c (edit, recall or react, with its clientMsgId and target
   * seq) of conversation cid until the server answers it, after everything
   * made before it.
   */
  putChange(cid, op, c, createdAt) {
    const e = { cid, op, clientMsgId: c.clientMsgId, seq: c.seq, createdAt };
    if (op === 'edit') e.body = c.body;
    if (op === 'react') Object.assign(e, { emoji: c.emoji, on: c.on });
    if (!valid(e)) return;
    this.keep(e);
  }

  /**
   * Adds entry e after everything kept, or, kept already (a send retried),
   * writes it in its place: a later page resends it in the order it was
   * made, before what was made after it, as its first attempt went out.
   */
  keep(e) {
    e.session = this.session.mark;
    const all = this.list();
    const i = all.findIndex((x) => x.clientMsgId === e.clientMsgId);
    if (i < 0) all.push(e);
    else all[i] = e;
    this.save(all);
  }

  /** The server answered (committed or refused for good) clientMsgId. */
  delete(clientMsgId) {
    const all = this.list();
    const rest = all.filter((x) => x.clientMsgId !== clientMsgId);
    if (rest.length !== all.length) this.save(rest);
  }

  /**
   * Signing out: what user userId did not get sent, in any tab of this
   * browser, is not left in it for the next person at it, nor what
   * another tab of the session writes back before it is told
   * (SessionMark).
   */
  static clearUser(userId, storage = globalThis.localStorage ?? null) {
    try {
      const mine = `${PREFIX}web-${userId}-`;
      for (const k of keysOf(storage)) if (k.startsWith(mine)) storage.removeItem(k);
    } catch {
      // Storage unavailable: nothing was kept.
    }
    markSignedOut(userId, storage);
  }

  /** Writes list as this outbox; nothing once this page's session was signed out. */
  save(list) {
    if (this.session.over()) return;
    try {
      if (list.length) this.storage?.setItem(this.key, JSON.stringify(list));
      else this.storage?.removeItem(this.key);
    } catch {
      // Full or unavailable (a private window): the send still goes out
      // from this page, it just does not survive it.
    }
  }
}

/** The keys in storage, read before any is removed. */
function keysOf(storage) {
  const keys = [];
  try {
    for (let i = 0; i < (storage?.length ?? 0); i++) {
      const k = storage.key(i);
      if (k) keys.push(k);
    }
  } catch {
    // Unavailable (a private window): nothing is kept in it.
  }
  return keys;
}
