// Sync keeps ChatState in step with the server: it applies live MQTT
// events, fills gaps from history (afterSeq), resyncs after every
// reconnect, sends with optimistic display, and sends read receipts while a
// conversation is on screen. Views call its methods; it never touches DOM
// except to ask whether the page is visible.

import { uuid4 } from '../uuid.js';
import { waitText } from '../api.js';
import { backoffDelay, retryAfterDelay } from '../retry.js';
import { changeFromEvent, eraseRecalled, isMessage, quoteOfMessage } from './lifecycle.js';

const PAGE = 50; // history page when opening or scrolling back
const FILL_PAGE = 200; // the server's cap: catch up in as few requests as possible
const SEND_TIMEOUT_MS = 15000; // online without an answer: "failed" with Retry; a late PUBACK still confirms
const TYPING_SHOW_MS = 3000;
const TYPING_SEND_EVERY_MS = 2000; // the server forwards at most one per second anyway
const OUTBOX_MAX_AGE_MS = 24 * 3600 * 1000; // sends and changes a later page still makes
const MEMBER_READS = 4; // conversation reads (members) on their way at once

/** A promise and its resolve. */
function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** Whether an outbox entry made at createdAt is still worth sending. */
function fresh(createdAt) {
  return Date.now() - Date.parse(createdAt) < OUTBOX_MAX_AGE_MS;
}

/**
 * What the user is told when an edit, recall or reaction (topic and
 * payload as published) was refused, on the page that made it or on a
 * later one that sent it again.
 */
export function changeFailedText(topic, payload, err) {
  const what = { edit: 'edit the message', recall: 'delete the message', react: `${payload.on ? 'add' : 'remove'} the reaction` }[topic] || 'change the message';
  return `Could not ${what}: ${err.message}`;
}

export class Sync {
  /**
   * @param {import('./state.js').ChatState} state
   * @param {import('../api.js').Api} api
   * @param {import('../mqtt-session.js').MqttSession} session
   */
  constructor(state, api, session) {
    this.state = state;
    this.api = api;
    this.session = session;
    this.me = state.me;
    this.fills = new Map(); // cid -> promise chain: one catch-up at a time
    this.fillRetries = new Map(); // cid -> {attempt, timer}: a failed catch-up's next try
    this.olderLoads = new WeakMap(); // Conversation -> its page of older messages on its way
    this.retryBaseMs = 1000;
    this.sendTimeoutMs = SEND_TIMEOUT_MS;
    this.changing = new Map(); // `${cid}:${seq}` -> the last change of that message on its way
    // Sends refused for a while (a rate limit, server trouble) and waiting
    // to go out again, by conversation, and the sends made after them,
    // held until they are answered: chatd numbers in arrival order.
    this.waitingSends = new Map(); // cid -> Set of clientMsgIds
    this.heldSends = new Map(); // cid -> pending sends, in the order made
    this.reading = new Set(); // cids with a read receipt in flight
    this.seenTimers = new Map();
    this.inboxBusy = null;
    this.inboxAgain = false;
    // Member reads (GET /v1/conversations/{id}): the one on its way of
    // each conversation, and those queued for the pool (pumpMembers).
    this.memberReads = new Map(); // cid -> {done, again}
    this.memberQueue = new Map(); // cid -> deferred, in the order asked
    this.memberWorkers = 0;
    this.openFailed = null; // the open conversation, when loading it failed
    this.typingSent = new Map(); // conversation id → when a typing indicator last went out
    // Sends not answered yet, kept across page loads (outbox.js); set by
    // main. restored: those of an earlier page were sent again.
    this.outbox = null;
    this.restored = false;
    this.restoredIds = new Set(); // outbox entries sent again, and this page's own before that
    // Requests retried after a busy answer stop when their answer is no
    // longer wanted: all of them on sign-out, those loading the open
    // conversation when another one is opened.
    this.ctl = new AbortController();
    this.openCtl = new AbortController();
    this.onRemoved = () => {}; // set by main: the open conversation went away
    this.onError = () => {}; // set by main: a message for the user
    this.onRecalled = () => {}; // set by main: the attachment ids of messages recalled
  }

  /**
   * The options of a request (api.js Req): stopped by signal (by default
   * on sign-out); while it waits to be retried, the wait is shown at
   * where ('inbox', or a conversation id), if given.
   */
  req(where, signal = this.ctl.signal) {
    const onWait = where === undefined ? undefined : (s, err) => this.state.setWait(where, s ? waitText(s, err) : '');
    return { signal, onWait };
  }

  start() {
    const s = this.session;
    s.addEventListener('status', (e) => this.state.setConnection(e.detail));
    s.addEventListener('connected', () => this.resync());
    s.addEventListener('event', (e) => this.onEvent(e.detail));
    document.addEventListener('visibilitychange', () => this.markRead());
    window.addEventListener('focus', () => this.markRead());
    this.refreshInbox();
    s.connect();
  }

  /**
   * After every (re)connect: events that happened while we were away were
   * either replayed by the persistent session or are caught here: the inbox
   * gives every conversation's lastSeq, and we fetch afterSeq=have where it
   * is ahead. Watermarks and membership are not replayed, so they come from
   * the inbox too. Duplicates of replayed messages are dropped by seq.
   */
  async resync() {
    if (this.people) this.people.refresh();
    await this.refreshInbox();
    const open = this.state.openId;
    if (!open) return;
    // Opening it failed (offline, say): it would stay "Loading…" for good,
    // and a click on its row changes no route. Try again now.
    if (this.openFailed === open) return this.open(open);
    this.refreshMembers(open);
    this.refreshSeen(open);
    this.markRead(); // one that failed while we were away
  }

  async refreshInbox() {
    if (this.inboxBusy) {
      this.inboxAgain = true;
      return this.inboxBusy;
    }
    this.inboxBusy = (async () => {
      do {
        this.inboxAgain = false;
        try {
          const asOf = this.state.mark();
          const entries = await this.api.inbox(this.req('inbox'));
          const open = this.state.openId;
          const held = open !== null && this.state.conv(open) !== null;
          // Cut short by the page bound: nothing unlisted is taken for
          // left (a conversation held open stays open too).
          const complete = entries.complete !== false;
          if (!complete) console.warn(`chatd: the inbox was read up to its first ${entries.length} conversations; those after them are kept as they are`);
          const behind = this.state.setInbox(entries, asOf, complete);
          // The open one is no longer listed: removed, its member.removed
          // not heard (a full queue keeps the stream's entries only). It
          // closes as on the event, or it would stay open blank, and
          // never load if the user were added back.
          if (held && !this.state.conv(open)) this.removed(open);
          for (const cid of behind) this.fill(cid);
          this.restoreOutbox();
          this.loadMissingMembers();
        } catch (e) {
          if (e.code !== 'network' && e.code !== 'aborted') this.onError(`Could not load conversations: ${e.message}`);
        }
      } while (this.inboxAgain);
      this.inboxBusy = null;
    })();
    return this.inboxBusy;
  }

  /**
   * A direct chat's row is titled by its peer: the inbox entry names it,
   * but a chatd older than that field leaves it out, and then only the
   * member list tells. Those are read, through the pool; nothing else a
   * row shows needs the members (a group's are read when it is opened).
   */
  loadMissingMembers() {
    for (const c of this.state.conversations.values()) {
      if (c.type === 'DIRECT' && !c.peerId() && !this.memberReads.has(c.id)) this.queueMembers(c.id);
    }
  }

  /**
   * Reads conversation cid's members again: an event says they changed,
   * or membership events may have been missed (a reconnect). Resolves
   * once a read asked after this call answered. One already on its way
   * may predate the change: one more read follows it, never one beside
   * it (their answers could come in either order), however many changes
   * were told meanwhile.
   */
  refreshMembers(cid) {
    const r = this.memberReads.get(cid);
    if (!r) return this.queueMembers(cid);
    r.again ??= deferred();
    return r.again.promise;
  }

  /**
   * Puts cid in the queue of member reads, once; the pool reads it.
   * Resolves once it has been read (or found gone).
   */
  queueMembers(cid, d = null) {
    const queued = this.memberQueue.get(cid);
    if (queued) {
      if (d) queued.promise.then(d.resolve);
      return queued.promise;
    }
    d ??= deferred();
    this.memberQueue.set(cid, d);
    this.pumpMembers();
    return d.promise;
  }

  /**
   * The pool: at most MEMBER_READS reads at once, taking the queue in
   * order. Every inbox read and event adds to the one queue: however
   * often they come, a conversation is read once while its read is on
   * its way, and the inbox rebuilt once per answer.
   */
  pumpMembers() {
    while (this.memberWorkers < MEMBER_READS && this.memberQueue.size && !this.stopped) {
      const [cid, d] = this.memberQueue.entries().next().value;
      this.memberQueue.delete(cid);
      this.memberWorkers++;
      this.readMembers(cid, this.req())
        .catch((e) => {
          if (e.code === 'not_member' || e.code === 'not_found') this.removed(cid);
        })
        .finally(() => {
          this.memberWorkers--;
          d.resolve();
          this.pumpMembers();
        });
    }
  }

  /**
   * One read of conversation cid with its members (GET
   * /v1/conversations/{id}), set into the state; the reads of cid asked
   * while it is on its way wait for it (memberReads). asOf: as
   * setConversation's. Resolves with the conversation as held.
   */
  readMembers(cid, req, asOf = this.state.mark()) {
    const r = { done: null, again: null };
    r.done = this.api.conversation(cid, req).then((d) => this.state.setConversation(d, asOf));
    this.memberReads.set(cid, r);
    const settled = () => {
      if (this.memberReads.get(cid) === r) this.memberReads.delete(cid);
      // A change told while it was on its way: read once more, unless
      // the read found the conversation gone.
      if (r.again && this.state.conv(cid)) this.queueMembers(cid, r.again);
      else r.again?.resolve();
    };
    r.done.then(settled, settled);
    return r.done;
  }

  /**
   * Reads cid's members for the user who opens it, ahead of the queue:
   * a read on its way serves if it succeeds; a queued one is taken out
   * of the queue and served by this one.
   */
  async openMembers(cid, req) {
    // One that failed may be followed by the read of a change told
    // meanwhile, started as it settled.
    for (let r; (r = this.memberReads.get(cid)); ) {
      const c = await r.done.catch(() => null);
      if (c?.members) return c;
    }
    const queued = this.memberQueue.get(cid);
    this.memberQueue.delete(cid);
    try {
      // Opened through its link, it is shown though an inbox read
      // found it gone (asOf Infinity): the user may be back in it.
      return await this.readMembers(cid, req, Infinity);
    } finally {
      queued?.resolve();
    }
  }

  /** A membership change told by event ev of conversation c, as held. */
  membersChanged(c, ev) {
    // Members not held (never opened) are read when it is opened; but
    // the entry of the user's own removal, its member.removed lost,
    // has the read find them gone.
    if (c.members || this.memberReads.has(c.id) || this.memberQueue.has(c.id) || ev.userId === this.me) this.refreshMembers(c.id);
  }

  onEvent(ev) {
    const cid = ev.conversationId;
    const c = this.state.conv(cid);
    switch (ev.type) {
      case 'message.new': {
        if (!c) {
          // A conversation we have not listed yet (someone just opened a
          // direct chat with us, or added us): the inbox brings it in.
          this.refreshInbox();
          return;
        }
        if (typeof ev.body !== 'string' && !ev.recalled) {
          // Large groups send no body: the event only says "seq exists".
          this.slimEntry(c, ev.seq, true, ev.senderId);
          return;
        }
        const msg = {
          conversationId: cid,
          seq: ev.seq,
          kind: 'message',
          senderId: ev.senderId,
          clientMsgId: ev.clientMsgId,
          body: ev.body ?? '',
          createdAt: ev.createdAt,
          msgType: ev.msgType,
          attachments: ev.attachments,
        };
        // A reply or forward, and (replayed late) its state.
        for (const k of ['replyTo', 'forwardedFrom', 'editedAt', 'recalled', 'recalledAt']) if (ev[k]) msg[k] = ev[k];
        if (msg.recalled) eraseRecalled(msg);
        this.recalling(cid, [msg]);
        if (this.state.addMessages(cid, [msg])) this.fill(cid);
        this.afterMessages(cid);
        return;
      }
      case 'message.edited':
      case 'message.recalled':
      case 'reaction.updated': {
        // Entries like message.new: applied to their message by seq, gaps
        // filled from history, duplicates dropped.
        if (!c) {
          this.refreshInbox();
          return;
        }
        const ch = changeFromEvent(ev);
        if (ch.slim) {
          this.slimEntry(c, ev.seq, false, ev.userId);
          return;
        }
        this.recalling(cid, [ch]);
        if (this.state.addMessages(cid, [ch])) this.fill(cid);
        this.afterMessages(cid);
        return;
      }
      case 'read.updated':
        this.state.applyRead(cid, ev.userId, ev.seq);
        if (ev.userId !== this.me && cid === this.state.openId) this.refreshSeen(cid);
        return;
      case 'typing':
        if (!c) return;
        this.state.setTyping(cid, ev.userId, Date.now() + TYPING_SHOW_MS);
        setTimeout(() => this.state.changed('typing'), TYPING_SHOW_MS + 50);
        return;
      case 'conversation.created':
        this.refreshInbox();
        return;
      case 'member.added':
        if (ev.userId === this.me || !c) this.refreshInbox();
        else this.membersChanged(c, ev);
        return;
      case 'member.removed':
        if (ev.userId === this.me) this.removed(cid);
        else if (c) this.membersChanged(c, ev);
        return;
      case 'system.new': {
        // A membership or settings change: an entry of the stream like a
        // message, shown as a notice (people.js has what the events mean).
        if (!c) {
          this.refreshInbox();
          return;
        }
        const entry = { ...ev, kind: 'system' };
        delete entry.type;
        if (this.state.addMessages(cid, [entry])) this.fill(cid);
        // The entry carries what it changed: applied here, a session that
        // dropped the live conversation.updated or member.updated (a full
        // queue catches up on the stream's entries only) still converges.
        if (ev.action === 'group.updated') this.state.updateConversation(ev);
        else this.membersChanged(c, ev);
        // The user added back to a conversation still held (their removal
        // and re-add dropped live, a full queue): the seqs of their
        // absence are not theirs and would count as unread messages of
        // unknown kind. The inbox tells the count, as on member.added.
        if (ev.action === 'member.added' && ev.userId === this.me) this.refreshInbox();
        return;
      }
      case 'conversation.updated':
        this.state.updateConversation(ev);
        return;
      case 'member.updated':
        if (c) this.membersChanged(c, ev);
        return;
      case 'profile.updated':
        if (this.people) this.people.apply(ev);
        return;
      case 'error':
        // MQTT 3.1.1 reports refused sends this way; v5 uses PUBACK codes.
        if (ev.clientMsgId) this.state.failPending(cid, ev.clientMsgId, ev.message || ev.code);
        return;
      default:
      // Unknown types are ignored: the contract may add some.
    }
  }

  /**
   * An entry whose event carried no content (large groups): only its seq
   * and kind are known; history brings the rest when the chat is loaded.
   * One the user wrote (on another device) moved their read watermark to
   * it, as any entry they write does (the server's rule): no badge for it,
   * nor for what came before it.
   */
  slimEntry(c, seq, message, writer) {
    c.kinds.set(seq, message);
    c.noteLast(seq, null, null);
    if (writer === this.me) c.lastReadSeq = Math.max(c.lastReadSeq, seq);
    if (!c.loaded) c.have = Math.max(c.have, seq);
    c.trim(c.id === this.state.openId);
    this.state.changed('messages');
    if (c.loaded) this.fill(c.id);
  }

  /**
   * Tells onRecalled the files of the held messages that entries recall
   * (a recall, or a message as history has it now: recalled), before
   * they apply and take the files off the messages: their downloads are
   * not kept in memory until evicted.
   */
  recalling(cid, entries) {
    const c = this.state.conv(cid);
    if (!c) return;
    const ids = [];
    for (const e of entries) {
      const m = c.messages.get(e.kind === 'recall' ? e.targetSeq : e.recalled ? e.seq : 0);
      if (m && !m.recalled && m.attachments) for (const a of m.attachments) ids.push(a.id);
    }
    if (ids.length) this.onRecalled(ids);
  }

  removed(cid) {
    // Not ours any more: its members are not read.
    this.memberQueue.get(cid)?.resolve();
    this.memberQueue.delete(cid);
    const wasOpen = this.state.openId === cid;
    this.state.removeConversation(cid);
    if (wasOpen) this.onRemoved(cid);
  }

  /**
   * Catches a loaded conversation up with afterSeq=have until it holds
   * everything up to lastSeq. Chained per conversation so two gaps never
   * fetch the same range twice at once.
   */
  fill(cid) {
    const prev = this.fills.get(cid) || Promise.resolve();
    const next = prev.then(async () => {
      const c = this.state.conv(cid);
      if (!c || !c.loaded) return;
      for (let i = 0; i < 100; i++) {
        const from = c.have;
        // Far behind (back after a long absence): the newest page now, as
        // on a first load, and the ones in between when scrolled up to.
        // Walking every missed page first would show the oldest of them
        // for minutes on a weak network, and mark them read one by one.
        const jump = c.lastSeq - from > FILL_PAGE;
        let page;
        try {
          page = await this.api.history(cid, jump ? { limit: PAGE } : { afterSeq: from, limit: FILL_PAGE }, this.req());
        } catch (e) {
          if (e.code === 'not_member' || e.code === 'not_found') this.removed(cid);
          else if (e.code !== 'aborted') this.retryFill(cid, e.retryAfter); // 503, 429, a network error while MQTT stays up
          return;
        }
        this.fillRetries.delete(cid);
        if (!page.length) return;
        this.recalling(cid, page);
        if (jump) {
          if (page[page.length - 1].seq <= c.have) return;
          const gap = this.state.loadLatest(cid, page);
          this.afterMessages(cid);
          if (!gap) return;
          continue;
        }
        let gap = this.state.addMessages(cid, page);
        if (c.have === from) gap = this.state.skipTo(cid, page[0].seq - 1);
        this.afterMessages(cid);
        if (!gap || c.have === from) return;
      }
    });
    this.fills.set(cid, next);
    next.finally(() => {
      if (this.fills.get(cid) === next) this.fills.delete(cid);
    });
    return next;
  }

  /**
   * A catch-up that failed is tried again after a backoff (1 s doubling to
   * 30 s, with jitter), or the Retry-After of a 429 if longer, while the
   * conversation is loaded: left alone it would wait for the
   * conversation's next message or a reconnect, and a gap would stay on
   * screen meanwhile.
   */
  retryFill(cid, retryAfter = 0) {
    if (this.stopped || (this.fillRetries.has(cid) && this.fillRetries.get(cid).timer)) return;
    const attempt = (this.fillRetries.get(cid)?.attempt ?? 0) + 1;
    const delay = Math.max(this.backoff(attempt), retryAfterDelay(retryAfter));
    const r = { attempt, timer: 0 };
    r.timer = setTimeout(() => {
      r.timer = 0;
      const c = this.state.conv(cid);
      if (c && c.loaded && c.lastSeq > c.have) this.fill(cid);
      else this.fillRetries.delete(cid);
    }, delay);
    this.fillRetries.set(cid, r);
  }

  /** The pause before retry n of a run of failures: 1 s doubling to 30 s, with jitter. */
  backoff(n) {
    return backoffDelay(n, this.retryBaseMs, 30000);
  }

  /**
   * Opens a conversation: its members and its newest page, asked for at
   * once, then receipts. The page shows when it comes: the view needs
   * no member list to show messages (names come from the people
   * directory; what needs a role or a member count stays out until the
   * members come). One not held yet (opened through its link) is held
   * once its members' read brings it: its page waits for that. The
   * receipts follow what is shown, not the members: a read receipt is
   * of seqs shown, "seen by" is chatd's count, and a members' answer
   * older than the receipt keeps the higher watermark (setConversation).
   */
  async open(cid) {
    this.openCtl.abort();
    this.openCtl = new AbortController();
    const req = this.req(cid, this.openCtl.signal);
    this.state.setOpen(cid);
    this.openFailed = null;
    const c = this.state.conv(cid);
    const members = !c || !c.members ? this.openMembers(cid, req) : null;
    const latest = !c || !c.loaded ? this.api.history(cid, { limit: PAGE }, req) : null;
    const shown = latest?.then(async (page) => {
      // Its read failed: not held, the page has nowhere to go (and
      // that failure is told once, below).
      if (!this.state.conv(cid)) await members?.catch(() => {});
      if (this.state.loadLatest(cid, page)) this.fill(cid);
      this.afterMessages(cid, true);
    });
    if (!latest) {
      // Behind (its catch-up failed, say): what the inbox shows comes now.
      if (c.lastSeq > c.have) this.fill(cid);
      this.afterMessages(cid, true);
    }
    const failures = (await Promise.allSettled([members, shown])).filter((r) => r.status === 'rejected').map((r) => r.reason);
    if (failures.length) return this.openFailedWith(cid, failures);
  }

  /** What open tells of its reads' failures errs (the same cause may fail both). */
  openFailedWith(cid, errs) {
    const gone = errs.find((e) => e.code === 'not_member' || e.code === 'not_found');
    if (gone) {
      this.removed(cid);
      this.onError(gone.code === 'not_found' ? 'That conversation does not exist.' : 'You are not a member of that conversation.');
      return;
    }
    // Another conversation was opened meanwhile: this one's wait is over.
    if (errs.some((e) => e.code === 'aborted')) return this.state.setWait(cid, '');
    if (this.state.openId === cid) this.openFailed = cid; // resync tries again
    this.onError(`Could not open the conversation: ${errs[0].message}`);
  }

  close() {
    this.openCtl.abort();
    this.state.setOpen(null);
  }

  /** Signing out: nothing is fetched any more (pending catch-up retries end). */
  stop() {
    this.close();
    for (const r of this.fillRetries.values()) clearTimeout(r.timer);
    this.fillRetries.clear();
    this.ctl.abort();
    this.stopped = true;
  }

  /**
   * Opens a conversation scrolled to one of its messages (a search hit):
   * older pages are loaded until it is among them. Returns whether it is
   * (null when the user went to another conversation meanwhile).
   */
  async jumpTo(cid, seq) {
    if (this.state.openId !== cid) await this.open(cid);
    const c = this.state.conv(cid);
    // The view leaves the newest entries for the hit: the pages loaded
    // for it stay, though messages come live meanwhile.
    if (c) c.atBottom = false;
    // Left meanwhile (the pages come slowly): no more pages, no jump when
    // the user comes back to it later.
    const here = () => this.state.openId === cid;
    for (let i = 0; c && here() && c.loaded && c.hasOlder && c.oldest > seq && i < 100; i++) {
      const before = c.oldest;
      await this.loadOlder(cid);
      if (c.oldest === before) break;
    }
    if (!here()) return null;
    if (c) {
      c.focusSeq = seq;
      this.state.changed('messages');
    }
    return Boolean(c && c.messages.has(seq));
  }

  /**
   * Scrolling up: the page before the oldest loaded message. One already
   * on its way (a scroll's, a jump's) is waited for: a jump asking for
   * the next page must not take "nothing came" for the top.
   */
  loadOlder(cid) {
    const c = this.state.conv(cid);
    if (c && c.loadingOlder) return this.olderLoads.get(c) || Promise.resolve();
    const page = this.olderPage(cid);
    if (c && c.loadingOlder) this.olderLoads.set(c, page);
    return page;
  }

  async olderPage(cid) {
    const c = this.state.conv(cid);
    if (!c || !c.loaded || !c.hasOlder || c.loadingOlder) return;
    c.loadingOlder = true;
    try {
      const before = c.oldest;
      // Stopped when another conversation is opened.
      const page = await this.api.history(cid, { beforeSeq: before, limit: PAGE }, this.req(cid, this.openCtl.signal));
      // A catch-up far behind moved the window to the newest page
      // meanwhile: this page would sit below a hole.
      if (c.oldest === before) this.state.addOlder(cid, page, before);
    } catch (e) {
      if (e.code !== 'network' && e.code !== 'aborted') this.onError(`Could not load older messages: ${e.message}`);
    } finally {
      c.loadingOlder = false;
    }
  }

  /** Shared follow-up whenever messages may have become visible. */
  afterMessages(cid, force = false) {
    if (cid !== this.state.openId) return;
    this.markRead();
    const c = this.state.conv(cid);
    if (c && (force || (c.seen?.seq ?? 0) !== c.lastOwnSeq())) this.refreshSeen(cid);
  }

  /**
   * Read receipt for what is on screen: only while the conversation is
   * open and the page visible, and only up to `have` (what was shown).
   */
  async markRead() {
    const cid = this.state.openId;
    const c = cid && this.state.conv(cid);
    if (!c || !c.loaded || document.visibilityState !== 'visible') return;
    if (c.have <= c.lastReadSeq || this.reading.has(cid)) return;
    this.reading.add(cid);
    const seq = c.have;
    let sent = false;
    try {
      const r = await this.api.markRead(cid, seq, this.req());
      this.state.applyRead(cid, this.me, r.lastReadSeq);
      sent = true;
    } catch {
      // Retried on the next change, focus or reconnect; not at once, which
      // would be a loop as fast as the failures (offline, 429, 403).
    } finally {
      this.reading.delete(cid);
    }
    // More was shown while it was on its way.
    if (sent && c.have > c.lastReadSeq && this.state.openId === cid) this.markRead();
  }

  /** "Seen" / "Seen by N" for our newest message, debounced. */
  refreshSeen(cid) {
    clearTimeout(this.seenTimers.get(cid));
    this.seenTimers.set(
      cid,
      setTimeout(async () => {
        const c = this.state.conv(cid);
        if (!c) return;
        const seq = c.lastOwnSeq();
        if (!seq) {
          this.state.setSeen(cid, null);
          return;
        }
        try {
          const r = await this.api.seen(cid, seq, this.req());
          // A newer own message may have appeared meanwhile.
          if (c.lastOwnSeq() === seq) this.state.setSeen(cid, { seq, seenBy: r.seenBy, members: r.members });
          else this.refreshSeen(cid);
        } catch {
          // Shown as plain "Sent" until the next refresh.
        }
      }, 100),
    );
  }

  /**
   * Sends with optimistic display: pending now, seq on PUBACK. `replyTo`
   * is the seq of a message of this conversation that this one answers;
   * `attachments` are complete uploads (their attachment objects).
   */
  send(cid, body, { replyTo = 0, attachments = [] } = {}) {
    const p = {
      clientMsgId: uuid4(),
      body,
      attachments,
      status: 'sending',
      seq: null,
      error: null,
      createdAt: new Date().toISOString(),
    };
    if (replyTo) p.replyTo = this.replyRef(cid, replyTo);
    // Before the first inbox answer (offline, say), what an earlier page
    // left unsent here goes first: the server numbers in arrival order.
    this.restoreConversation(cid, p.clientMsgId);
    this.state.addPending(cid, p);
    this.outbox?.put(cid, p);
    this.publish(cid, p);
    return p.clientMsgId;
  }

  /**
   * Once the conversations are known: the sends an earlier page of this
   * tab (or of a closed one, Outbox.adoptOrphans) left unanswered show as "Sending…" again and go out with their
   * clientMsgId (a resend of one that got through is answered with its
   * seq), and its edits, recalls and reactions go out again with theirs
   * (a resend of one that got through changes nothing), all in the order
   * they were made. Those of conversations we are no longer in,
   * and those older than a day, are dropped.
   */
  restoreOutbox() {
    if (this.restored || !this.outbox) return;
    this.restored = true;
    for (const e of this.outbox.list()) this.restoreEntry(e, true);
  }

  /**
   * restoreOutbox for conversation cid alone, ahead of the rest, before
   * the inbox answered: the user writes there now, so it is theirs as far
   * as the page knows (the server refuses what is not). own is the
   * clientMsgId of what the page itself is about to send: not again then.
   */
  restoreConversation(cid, own) {
    if (this.restored || !this.outbox) return;
    for (const e of this.outbox.list()) if (e.cid === cid) this.restoreEntry(e, false);
    this.restoredIds.add(own);
  }

  /**
   * Sends again outbox entry e of an earlier page, once. listed: the
   * inbox answered, and a conversation it does not hold is not ours.
   */
  restoreEntry(e, listed) {
    if (this.restoredIds.has(e.clientMsgId)) return;
    this.restoredIds.add(e.clientMsgId);
    const c = this.state.conv(e.cid);
    // One older than a day (a tab id not claimed again until much
    // later) is not sent out of the blue: its words may be stale, its
    // uploads expired (upload_ttl).
    if ((listed && !c) || !fresh(e.createdAt)) {
      this.outbox.delete(e.clientMsgId);
      return;
    }
    if (e.op) {
      const payload = changePayload(e);
      // Refused for good meanwhile (past the edit window, say): told as
      // the page that made it would have.
      this.queueChange(e.cid, e.op, payload, e.createdAt).catch((err) => {
        if (!this.stopped) this.onError(changeFailedText(e.op, payload, err));
      });
      return;
    }
    if (c?.pending.has(e.clientMsgId)) return;
    const p = { clientMsgId: e.clientMsgId, body: e.body, attachments: e.attachments || [], status: 'sending', seq: null, error: null, createdAt: e.createdAt };
    if (e.replyTo) p.replyTo = e.replyTo;
    this.state.addPending(e.cid, p);
    this.publish(e.cid, p);
  }

  /** A failed send taken back by the user: off the page and the outbox. */
  discard(cid, clientMsgId) {
    this.state.removeFailed(cid, clientMsgId);
    this.outbox?.delete(clientMsgId);
  }

  /** chatd's body limit in bytes of UTF-8, as its CONNACK said (0: not told). */
  maxBodyBytes() {
    return this.session?.maxBodyBytes || 0;
  }

  /** Resends with the same clientMsgId: the server deduplicates. */
  retry(cid, clientMsgId) {
    const p = this.state.retryPending(cid, clientMsgId);
    if (!p) return;
    this.outbox?.put(cid, p);
    this.publish(cid, p);
  }

  publish(cid, p) {
    const waiting = this.waitingSends.get(cid);
    if (waiting && !waiting.has(p.clientMsgId)) {
      const held = this.heldSends.get(cid) ?? [];
      if (!held.includes(p)) held.push(p);
      this.heldSends.set(cid, held);
      return;
    }
    const attempt = (p.attempt = (p.attempt || 0) + 1);
    // p no longer waits to be sent again: once none of the conversation
    // does, the sends held behind them go, in the order made.
    const settled = () => {
      const w = this.waitingSends.get(cid);
      if (!w?.delete(p.clientMsgId) || w.size) return;
      this.waitingSends.delete(cid);
      const held = this.heldSends.get(cid) ?? [];
      this.heldSends.delete(cid);
      for (const q of held) if (!this.stopped && this.state.conv(cid)?.pending.get(q.clientMsgId) === q) this.publish(cid, q);
    };
    const start = Date.now();
    // Only time online counts: offline, mqtt.js holds the publish and sends
    // it on reconnect, and "Not sent" meanwhile would have the user write
    // it again, a second message.
    let timer = 0;
    const check = () => {
      if (p.attempt !== attempt || p.seq !== null || this.stopped) return;
      const online = this.state.connection === 'online';
      const left = online ? Math.max(start, this.state.onlineAt) + this.sendTimeoutMs - Date.now() : this.sendTimeoutMs;
      if (left > 0) timer = setTimeout(check, left);
      else this.state.failPending(cid, p.clientMsgId, 'No answer from the server.');
    };
    timer = setTimeout(check, this.sendTimeoutMs);
    const extra = p.replyTo ? { replyTo: p.replyTo.seq } : {};
    const refs = (p.attachments || []).map((a) => (a.caption ? { uploadId: a.id, caption: a.caption } : { uploadId: a.id }));
    if (refs.length) extra.attachments = refs;
    this.session.send(cid, p.clientMsgId, p.body, extra).then(
      ({ seq }) => {
        clearTimeout(timer);
        this.outbox?.delete(p.clientMsgId);
        settled();
        if (seq === null) {
          this.fill(cid); // no seq property (not chatd?): history tells
          return;
        }
        p.seq = seq;
        p.status = 'sent';
        const msg = {
          conversationId: cid,
          seq,
          senderId: this.me,
          clientMsgId: p.clientMsgId,
          body: p.body,
          createdAt: p.createdAt,
          attachments: p.attachments && p.attachments.length ? p.attachments : undefined,
          local: true, // replaced by the server's copy when message.new arrives
        };
        if (p.replyTo) msg.replyTo = p.replyTo;
        if (this.state.addMessages(cid, [msg])) this.fill(cid);
        this.afterMessages(cid);
      },
      (err) => {
        clearTimeout(timer);
        // Refused for server trouble or a rate limit (a reason code a
        // resend may pass, docs/protocol.md): still on its way ("Sending…",
        // kept in the outbox), sent again with its clientMsgId after a
        // backoff, or after the rate limit's retryAfter if longer.
        if (err.retryable && typeof err.reasonCode === 'number' && fresh(p.createdAt) && !this.stopped) {
          if (!this.waitingSends.has(cid)) this.waitingSends.set(cid, new Set());
          this.waitingSends.get(cid).add(p.clientMsgId);
          // Marked "Not sent" when no answer came in time (chatd may take
          // up to its send_timeout, a minute): on its way again now.
          if (p.status === 'failed') this.state.retryPending(cid, p.clientMsgId);
          setTimeout(() => {
            if (p.attempt === attempt && !this.stopped && this.state.conv(cid)?.pending.get(p.clientMsgId) === p) this.publish(cid, p);
            else settled();
          }, Math.max(this.backoff(attempt), retryAfterDelay(err.retryAfter)));
          return;
        }
        settled();
        // Refused by the server (a reason code): not worth a resend by a
        // later page. Not answered (signed out, the connection closed
        // before mqtt.js sent it): kept.
        if (typeof err.reasonCode === 'number') this.outbox?.delete(p.clientMsgId);
        // 0x99: over the body limit; 0x95: a packet over the size the
        // server announced. Either way a resend cannot pass.
        this.state.failPending(cid, p.clientMsgId, err.message || 'Not sent.', err.reasonCode === 0x99 || err.reasonCode === 0x95);
      },
    );
  }

  /** What a reply to seq shows until the server's copy comes. */
  replyRef(cid, seq) {
    const t = this.state.conv(cid)?.messages.get(seq);
    if (!t || !isMessage(t)) return { seq, senderId: 0, snippet: '' };
    return quoteOfMessage(seq, t);
  }

  /**
   * Forwards message seq of conversation fromCid into toCid: a new message
   * that copies its body (the server copies it; ours stays empty).
   * Resolves with the new message's seq.
   */
  async forward(toCid, fromCid, seq) {
    const { seq: sent } = await this.session.send(toCid, uuid4(), '', { forward: { conversationId: fromCid, seq } });
    if (sent) this.expect(toCid, sent, true);
    return sent;
  }

  /** Replaces the body of our message seq. */
  edit(cid, seq, body) {
    return this.change(cid, 'edit', { clientMsgId: uuid4(), seq, body });
  }

  /** Takes message seq back for everyone. */
  recall(cid, seq) {
    return this.change(cid, 'recall', { clientMsgId: uuid4(), seq });
  }

  /** Sets (on) or removes our emoji on message seq. */
  react(cid, seq, emoji, on) {
    return this.change(cid, 'react', { clientMsgId: uuid4(), seq, emoji, on });
  }

  /**
   * Publishes a change. Its effect shows when its entry arrives (the event
   * follows the PUBACK at once), so every client applies the same entries
   * in the same order. It is kept in the outbox until the server answers,
   * so a later page of this tab sends it again if this one goes away
   * first. Refusals reject with the server's reason.
   */
  change(cid, topic, payload) {
    const createdAt = new Date().toISOString();
    this.restoreConversation(cid, payload.clientMsgId); // as for a send
    this.outbox?.putChange(cid, topic, payload, createdAt);
    return this.queueChange(cid, topic, payload, createdAt);
  }

  /**
   * The changes of one message go out one after another, in the order
   * they were made: one tried again after a busy server must not land
   * after a later one (a reaction set then removed would stay set). The
   * first goes out at once, in order with the sends made around it.
   */
  queueChange(cid, topic, payload, createdAt) {
    const key = `${cid}:${payload.seq}`;
    const prev = this.changing.get(key);
    const run = () => this.publishChange(cid, topic, payload, createdAt);
    const next = prev ? prev.catch(() => {}).then(run) : run();
    this.changing.set(key, next);
    const done = () => {
      if (this.changing.get(key) === next) this.changing.delete(key);
    };
    next.then(done, done);
    return next;
  }

  /**
   * Sends a change until the server answers it for good: committed (a
   * resend that got through earlier is a duplicate and changes nothing)
   * or refused for a reason a resend cannot change (past the edit window,
   * not a member, recalled): then it leaves the outbox. Server trouble
   * and rate limits are tried again with the same clientMsgId, backing
   * off (after a rate limit at least its retryAfter), for up to a day;
   * unanswered (signed out before it went out), it stays for a later page.
   */
  async publishChange(cid, topic, payload, createdAt) {
    for (let attempt = 1; ; attempt++) {
      let wait;
      try {
        const { seq } = await this.session.change(cid, topic, payload);
        this.outbox?.delete(payload.clientMsgId);
        if (seq) this.expect(cid, seq, false);
        return seq;
      } catch (err) {
        if (typeof err.reasonCode !== 'number' || this.stopped) throw err;
        if (!err.retryable || !fresh(createdAt)) {
          this.outbox?.delete(payload.clientMsgId);
          throw err;
        }
        wait = Math.max(this.backoff(attempt), retryAfterDelay(err.retryAfter));
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /**
   * The PUBACK says entry seq exists. Its event normally comes right
   * after; if it has not arrived shortly (an event lost with a
   * non-persistent session), history fills the conversation up to it.
   */
  expect(cid, seq, message) {
    const c = this.state.conv(cid);
    if (!c) return;
    // Ours, so read (the server moves the writer's watermark), and of a
    // known kind: no badge for it while the event is on its way.
    c.kinds.set(seq, message);
    c.noteLast(seq, null, null);
    c.lastReadSeq = Math.max(c.lastReadSeq, seq);
    setTimeout(() => {
      const c2 = this.state.conv(cid);
      if (c2 && c2.loaded && c2.have < seq) this.fill(cid);
    }, 2000);
  }

  /** Throttled "typing" signal while the user types. */
  typing(cid) {
    const now = Date.now();
    if (now - (this.typingSent.get(cid) ?? 0) < TYPING_SEND_EVERY_MS) return;
    // Per conversation, as the server's throttle: typing here says nothing
    // of another conversation. Those not typed in for a while go.
    for (const [id, at] of this.typingSent) if (now - at >= TYPING_SEND_EVERY_MS) this.typingSent.delete(id);
    this.typingSent.set(cid, now);
    this.session.typing(cid);
  }

  /** req: the dialog's (api.js Req). */
  async openDirect(peerId, req = {}) {
    const conv = await this.api.openDirect(peerId, req);
    this.state.setConversation(conv);
    this.refreshInbox();
    return conv.id;
  }

  /**
   * Creates a group. A create that failed (its answer may have been lost
   * on a weak network) asked again with the same title and members
   * carries the same Idempotency-Key, so chatd answers with the group the
   * first made, if it did, instead of making a second one.
   */
  async createGroup(title, members, req = {}) {
    const what = JSON.stringify([title, members]);
    if (this.groupAsked?.what !== what) this.groupAsked = { what, key: uuid4() };
    const conv = await this.api.createGroup(title, members, this.groupAsked.key, req);
    this.groupAsked = null;
    this.state.setConversation(conv);
    this.refreshInbox();
    return conv.id;
  }

  async addMember(cid, userId, req = {}) {
    await this.api.addMember(cid, userId, req);
    await this.refreshMembers(cid);
  }
}

/** The payload of an outbox entry's change, as its topic takes it (no more fields: chatd refuses unknown ones). */
function changePayload(e) {
  const p = { clientMsgId: e.clientMsgId, seq: e.seq };
  if (e.op === 'edit') p.body = e.body;
  if (e.op === 'react') Object.assign(p, { emoji: e.emoji, on: e.on });
  return p;
}
