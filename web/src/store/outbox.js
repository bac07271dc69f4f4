// Own sends the server has not answered yet, kept in localStorage under
// the tab's MQTT client id: a message written just before the tab went
// away (a phone's browser discards a background tab, a reload while
// "Sending…") is sent again, with its clientMsgId, when the page comes
// back, and chatd commits it once however many attempts reach it
// (docs/protocol.md "Send outcomes"). mqtt.js's own queue of unacknowledged
// publishes lives in the page's memory and goes with it.

const PREFIX = 'chatd.outbox.';

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

  /** @returns {{cid:number, clientMsgId:string, body:string, attachments?:any[], replyTo?:any, createdAt:string}[]} oldest first */
  list() {
    try {
      const v = JSON.parse(this.storage?.getItem(this.key) || '[]');
      return Array.isArray(v) ? v.filter((e) => e && Number.isSafeInteger(e.cid) && typeof e.clientMsgId === 'string' && typeof e.body === 'string') : [];
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

  /** The server answered (committed or refused) the send clientMsgId. */
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
