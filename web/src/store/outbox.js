// Own sends, edits, recalls and reactions the server has not answered yet,
// kept in localStorage under the tab's MQTT client id, in the order they
// were made: one made just before the tab went away (a phone's browser
// discards a background tab, a reload while "Sending…") is sent again,
// with its clientMsgId, when the page comes back, and chatd commits it once
// however many attempts reach it (docs/protocol.md "Send outcomes",
// "Message lifecycle"). mqtt.js's own queue of unacknowledged publishes
// lives in the page's memory and goes with it.

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
   *   one outbox per tab, so two tabs never send each other's messages
   * @param {Storage|null} storage
   */
  constructor(clientId, storage = globalThis.localStorage ?? null) {
    this.key = PREFIX + clientId;
    this.storage = storage;
  }

  /**
   * Sends have no op; changes have op (their topic) and seq (their target).
   * @returns {{cid:number, clientMsgId:string, op?:'edit'|'recall'|'react', seq?:number, body?:string,
   *   emoji?:string, on?:boolean, attachments?:any[], replyTo?:any, createdAt:string}[]} oldest first
   */
  list() {
    try {
      const v = JSON.parse(this.storage?.getItem(this.key) || '[]');
      return Array.isArray(v) ? v.filter(valid) : [];
    } catch {
      return [];
    }
  }

  /** Keeps pending send p of conversation cid until the server answers it. */
  put(cid, p) {
    const e = { cid, clientMsgId: p.clientMsgId, body: p.body, createdAt: p.createdAt };
    if (p.attachments && p.attachments.length) e.attachments = p.attachments;
    if (p.replyTo) e.replyTo = p.replyTo;
    this.save([...this.list().filter((x) => x.clientMsgId !== p.clientMsgId), e]);
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
    this.save([...this.list().filter((x) => x.clientMsgId !== c.clientMsgId), e]);
  }

  /** The server answered (committed or refused for good) clientMsgId. */
  delete(clientMsgId) {
    const all = this.list();
    const rest = all.filter((x) => x.clientMsgId !== clientMsgId);
    if (rest.length !== all.length) this.save(rest);
  }

  /**
   * Signing out: what user userId did not get sent, in any tab of this
   * browser, is not left in it for the next person at it.
   */
  static clearUser(userId, storage = globalThis.localStorage ?? null) {
    try {
      const mine = `${PREFIX}web-${userId}-`;
      const keys = [];
      for (let i = 0; i < (storage?.length ?? 0); i++) keys.push(storage.key(i));
      for (const k of keys) if (k && k.startsWith(mine)) storage.removeItem(k);
    } catch {
      // Storage unavailable: nothing was kept.
    }
  }

  save(list) {
    try {
      if (list.length) this.storage?.setItem(this.key, JSON.stringify(list));
      else this.storage?.removeItem(this.key);
    } catch {
      // Full or unavailable (a private window): the send still goes out
      // from this page, it just does not survive it.
    }
  }
}
