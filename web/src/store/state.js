// The client's model of the user's conversations. Pure data: no network, no
// DOM, so the ordering rules can be unit-tested in Node (web/test/).
//
// The rules follow docs/protocol.md "How a client resumes and detects gaps":
// per conversation we keep `have`, the highest seq up to which we hold every
// message, and only messages at or below it are shown. A message above
// have+1 is kept but not shown until history (afterSeq=have) fills the gap,
// so the user never sees messages out of order, twice, or with a hole.
// Edits, recalls and reactions are entries of the same stream (see
// lifecycle.js): held by seq like messages, applied to their message when
// `have` passes them, never shown as rows of their own.

import { applyChange, isChange, isMessage, isSystem, snippet, unreadCount, writerOf } from './lifecycle.js';

/**
 * @typedef {{conversationId:number, seq:number, senderId:number,
 *   clientMsgId:string, body:string, createdAt:string, local?:boolean}} Message
 * @typedef {{clientMsgId:string, body:string, status:'sending'|'failed',
 *   seq:number|null, error:string|null, createdAt:string}} Pending
 */

// The entries a loaded conversation keeps off screen or followed at its
// newest (Conversation.trim), and an unloaded one (Conversation.add).
const KEEP = 200;

export class ChatState extends EventTarget {
  /** @param {number} me the signed-in user's id */
  constructor(me) {
    super();
    this.me = me;
    /** @type {Map<number, Conversation>} */
    this.conversations = new Map();
    this.openId = null;
    this.connection = 'connecting'; // connecting | online | offline | refused (stopped: MqttSession.stopRefused)
    this.onlineAt = 0; // when the connection last came online (ms epoch)
    this.inboxLoaded = false;
    /** @type {Map<string|number, string>} 'inbox' or a conversation id -> what a request retried there waits for */
    this.waits = new Map();
    // A listing of the inbox tells the conversations as they were when it
    // was read: one added or removed here after that (a group created, a
    // removal event) is newer than it. mark() stamps a read's start.
    this.clock = 0;
    /** @type {Map<number, number>} conversation id -> clock when removed */
    this.gone = new Map();
  }

  /** The clock before an inbox read, for setInbox's asOf. */
  mark() {
    return ++this.clock;
  }

  /** Tells the views to re-render; they coalesce to one frame. */
  changed(what = 'all') {
    this.dispatchEvent(new CustomEvent('change', { detail: what }));
  }

  conv(id) {
    return this.conversations.get(id) || null;
  }

  /** Conversation id, added empty when this state does not hold it yet. */
  ensure(id) {
    let c = this.conversations.get(id);
    if (!c) {
      c = new Conversation(id, this.me);
      c.addedAt = this.clock;
      this.conversations.set(id, c);
    }
    return c;
  }

  /** Conversations, most recent activity first (as the server's inbox). */
  sortedConversations() {
    return [...this.conversations.values()].sort((a, b) => {
      const ta = a.activityAt(), tb = b.activityAt();
      if (ta !== tb) return tb < ta ? -1 : 1;
      return b.id - a.id;
    });
  }

  /**
   * Merges an inbox listing, read from the server after mark() returned
   * asOf (by default: read now). When it is complete, conversations
   * missing from it were left or removed and are dropped, but not one
   * added since asOf; one removed since asOf is not brought back. A
   * listing cut short (complete false: Api.inbox's page bound) drops
   * nothing: what it leaves out may still be the user's. Returns the ids
   * of loaded conversations whose lastSeq is ahead of what we hold: they
   * need an afterSeq fetch.
   */
  setInbox(entries, asOf = Infinity, complete = true) {
    const seen = new Set();
    const behind = [];
    for (const e of entries) {
      seen.add(e.id);
      if ((this.gone.get(e.id) ?? -1) >= asOf) continue;
      const c = this.ensure(e.id);
      c.type = e.type;
      c.createdAt = e.createdAt || c.createdAt;
      if (e.peerId) c.peer = e.peerId;
      // A group renamed (or its picture changed) live since asOf keeps
      // what the event said.
      if (c.settingsAt < asOf) {
        c.title = e.title || '';
        c.avatarUrl = e.avatar || null;
      }
      c.lastReadSeq = Math.max(c.lastReadSeq, e.lastReadSeq || 0);
      c.settings = e.settings || null; // mute (PUT /v1/conversations/{id}/settings)
      // Its copy of the message we preview was read before an edit or
      // recall of it came live since asOf: ours has that applied.
      const m = e.lastMessage || null;
      const stale = m && c.lastMessage && m.seq === c.lastMessage.seq && c.previewAt >= asOf;
      c.noteLast(e.lastSeq || 0, stale ? null : m, e.lastMessageAt || null);
      c.setUnreadSnapshot(e);
      if (!c.loaded) c.have = Math.max(c.have, c.lastSeq);
      else if (c.lastSeq > c.have) behind.push(c.id);
    }
    for (const [id, c] of complete ? [...this.conversations] : []) {
      if (!seen.has(id) && c.addedAt < asOf) this.drop(id);
    }
    this.inboxLoaded = true;
    this.changed('inbox');
    return behind;
  }

  /**
   * Adds or refreshes one conversation from GET /v1/conversations/{id},
   * read after mark() returned asOf (by default: read now). One removed
   * since asOf is not brought back: null.
   */
  setConversation(d, asOf = Infinity) {
    if ((this.gone.get(d.id) ?? -1) >= asOf) return null;
    const c = this.ensure(d.id);
    c.type = d.type;
    c.createdAt = d.createdAt || c.createdAt;
    if (c.settingsAt < asOf) {
      c.title = d.title || '';
      c.applySettings(d);
    }
    c.noteLast(d.lastSeq || 0, null, d.lastMessageAt || null);
    if (!c.loaded) c.have = Math.max(c.have, c.lastSeq);
    if (Array.isArray(d.members)) {
      // Watermarks only move forward: one a live read.updated moved after
      // this list was read stays where it went.
      const read = new Map((c.members || []).map((m) => [m.userId, m.lastReadSeq]));
      c.members = d.members.map((m) => ({ userId: m.userId, role: m.role, lastReadSeq: Math.max(m.lastReadSeq || 0, read.get(m.userId) ?? 0), joinedAt: m.joinedAt }));
      // The user's own may have moved before any list was held (a
      // receipt sent while this one was read).
      const mine = c.members.find((m) => m.userId === this.me);
      if (mine) mine.lastReadSeq = c.lastReadSeq = Math.max(c.lastReadSeq, mine.lastReadSeq);
    }
    this.changed('conv');
    return c;
  }

  /**
   * Applies fn to conversation id and tells the views `what` changed;
   * nothing happens for a conversation this state does not hold. Returns
   * what fn returns, or false (no gap) for an unknown conversation.
   */
  update(id, what, fn) {
    const c = this.conversations.get(id);
    if (!c) return false;
    const last = c.lastMessage, rev = last?.rev;
    const result = fn(c);
    c.trim(id === this.openId);
    // A change applied to the inbox preview: a listing read before it is older.
    if (last && c.lastMessage === last && last.rev !== rev) c.previewAt = this.clock;
    this.changed(what);
    return result;
  }

  /** conversation.updated: a group's settings after a change. */
  updateConversation(ev) {
    this.update(ev.conversationId, 'conv', (c) => {
      c.applySettings(ev);
      c.settingsAt = this.clock;
    });
  }

  removeConversation(id) {
    this.gone.set(id, this.clock);
    if (this.drop(id)) this.changed('inbox');
  }

  /**
   * Forgets conversation id, no longer the user's (removed, left, gone
   * from the inbox): a 'removed' event (detail: the id) tells what shows
   * it outside the page (its notifications). Returns whether it was held.
   */
  drop(id) {
    const held = this.conversations.delete(id);
    this.dispatchEvent(new CustomEvent('removed', { detail: id }));
    return held;
  }

  /**
   * Ingests messages from a live event, a history page or a PUBACK.
   * Returns true when a gap remains (a message above have+1 is held): the
   * caller fetches afterSeq=have.
   */
  addMessages(id, msgs) {
    return this.update(id, 'messages', (c) => c.add(msgs));
  }

  /** First load of a conversation: the newest page of history. */
  loadLatest(id, page) {
    return this.update(id, 'messages', (c) => c.loadLatest(page));
  }

  /** History answered afterSeq=have with a later first message. */
  skipTo(id, seq) {
    return this.update(id, 'messages', (c) => c.skipTo(seq));
  }

  /** An older page (beforeSeq); `page` is ascending like every page. */
  addOlder(id, page, requested) {
    this.update(id, 'messages', (c) => c.addOlder(page, requested));
  }

  /** A member's read watermark moved (read.updated or our own receipt). */
  applyRead(id, userId, seq) {
    this.update(id, 'read', (c) => {
      if (userId === this.me) c.lastReadSeq = Math.max(c.lastReadSeq, seq);
      const m = c.members && c.members.find((x) => x.userId === userId);
      if (m) m.lastReadSeq = Math.max(m.lastReadSeq, seq);
    });
  }

  /** An own send on its way; not one shown committed already (an earlier page's, resent). */
  addPending(id, p) {
    this.update(id, 'messages', (c) => {
      if (!c.visible().some((m) => m.clientMsgId === p.clientMsgId)) c.pending.set(p.clientMsgId, p);
    });
  }

  /**
   * A send failed: keep the text and clientMsgId so Retry resends it;
   * tooLarge: refused for good as over the body limit (no Retry).
   */
  failPending(id, clientMsgId, error, tooLarge = false) {
    const p = this.conversations.get(id)?.pending.get(clientMsgId);
    if (!p || p.seq !== null) return;
    p.status = 'failed';
    p.error = error;
    p.tooLarge = tooLarge;
    this.changed('messages');
  }

  /** A failed send the user took back (to shorten it): gone from the list. */
  removeFailed(id, clientMsgId) {
    const c = this.conversations.get(id);
    if (c?.pending.get(clientMsgId)?.status !== 'failed') return;
    this.update(id, 'messages', (c) => c.pending.delete(clientMsgId));
  }

  retryPending(id, clientMsgId) {
    const p = this.conversations.get(id)?.pending.get(clientMsgId);
    if (!p) return null;
    p.status = 'sending';
    p.error = null;
    this.changed('messages');
    return p;
  }

  setTyping(id, userId, until) {
    if (userId === this.me) return;
    this.update(id, 'typing', (c) => c.typing.set(userId, until));
  }

  setSeen(id, seen) {
    this.update(id, 'seen', (c) => {
      c.seen = seen;
    });
  }

  setOpen(id) {
    this.openId = id;
    this.changed('open');
  }

  /** A request loading where ('inbox', a conversation id) waits to be retried: text says so ('' when not). */
  setWait(where, text) {
    if ((this.waits.get(where) || '') === text) return;
    if (text) this.waits.set(where, text);
    else this.waits.delete(where);
    this.changed('wait');
  }

  setConnection(s) {
    if (this.connection === s) return;
    this.connection = s;
    if (s === 'online') this.onlineAt = Date.now();
    this.changed('connection');
  }
}

export class Conversation {
  constructor(id, me) {
    this.id = id;
    this.me = me;
    this.addedAt = 0; // ChatState's clock when it was added
    this.settingsAt = -1; // ChatState's clock when an event last changed its group settings
    this.previewAt = -1; // ChatState's clock when a change was last applied to lastMessage
    this.type = 'GROUP';
    this.title = '';
    this.createdAt = null;
    this.lastSeq = 0;
    this.lastReadSeq = 0;
    this.lastMessage = null;
    this.lastMessageAt = null;
    /** @type {{userId:number, role:string, lastReadSeq:number, joinedAt?:string}[]|null} */
    this.members = null;
    this.peer = null; // a direct conversation's other member (inbox peerId)
    this.about = '';
    this.avatarUrl = null;
    this.historyVisible = '';
    // Before the first history load we hold no bodies worth showing, so
    // `have` just follows lastSeq; loadLatest() makes the window exact.
    this.loaded = false;
    this.have = 0;
    /** @type {Map<number, Message>} */
    this.messages = new Map();
    this.oldest = 0; // lowest seq loaded (0: none)
    this.hasOlder = false;
    // On screen, scrolled to its newest entries and following them (the
    // conversation view says): what is scrolled past may go (trim).
    this.atBottom = false;
    /** @type {Map<string, Pending>} own sends not yet shown as committed */
    this.pending = new Map();
    /** @type {Map<number, number>} userId -> typing until (ms epoch) */
    this.typing = new Map();
    this.seen = null; // {seq, seenBy, members} for our last message
    /** @type {Map<number, boolean>} seq -> is a message (not a change), as far as heard */
    this.kinds = new Map();
    this.kindsTrimAt = 2 * KEEP; // kinds' size at which trim() forgets those read
    /** @type {{seq:number, read:number, n:number}|null} the inbox's unread count at its lastSeq */
    this.unreadAt = null;
  }

  /** Unread messages: system entries, edits, recalls and reactions move
   * lastSeq but do not count (the server's rule, chat_unread). */
  get unread() {
    return Math.max(0, unreadCount(this));
  }

  /** Takes the inbox entry's exact unread count as the base of `unread`. */
  setUnreadSnapshot(e) {
    const seq = e.lastSeq || 0, read = e.lastReadSeq || 0;
    const n = Number.isInteger(e.unread) ? e.unread : Math.max(0, seq - read);
    this.unreadAt = { seq, read, n };
    // Kinds at or below both the snapshot and the watermark never count again.
    const floor = Math.min(seq, this.lastReadSeq);
    for (const k of this.kinds.keys()) if (k <= floor && !this.messages.has(k)) this.kinds.delete(k);
  }

  activityAt() {
    return this.lastMessageAt || this.createdAt || '';
  }

  /** The other user of a direct chat: the inbox's peerId, else the members. */
  peerId() {
    if (this.type !== 'DIRECT') return null;
    if (this.peer) return this.peer;
    if (!this.members) return null;
    const m = this.members.find((x) => x.userId !== this.me);
    return m ? m.userId : null;
  }

  /** A conversation's (or conversation.updated's) group settings. */
  applySettings(d) {
    if (d.peerId) this.peer = d.peerId;
    if (typeof d.title === 'string') this.title = d.title;
    if (typeof d.about === 'string') this.about = d.about;
    if (d.avatar !== undefined) this.avatarUrl = d.avatar || null;
    if (d.historyVisible) this.historyVisible = d.historyVisible;
  }

  myRole() {
    return this.members?.find((m) => m.userId === this.me)?.role || null;
  }

  /** Tracks the newest seq and the inbox preview; never moves backwards. */
  noteLast(seq, msg, at) {
    if (seq > this.lastSeq) this.lastSeq = seq;
    if (msg && (!this.lastMessage || msg.seq >= this.lastMessage.seq)) this.lastMessage = msg;
    if (at && (!this.lastMessageAt || at > this.lastMessageAt)) this.lastMessageAt = at;
  }

  add(msgs) {
    for (const m of msgs) {
      const old = this.messages.get(m.seq);
      const msg = isMessage(m);
      // Messages and system notices are shown (and previewed in the inbox);
      // edits, recalls and reactions change what they target.
      const shown = msg || isSystem(m);
      // An entry older than the loaded window (a session's replay reaching
      // it after the newest page came) is not held: the changes after it
      // were passed over, so an older page brings it as it is now.
      const older = this.loaded && this.oldest > 0 && m.seq < this.oldest;
      // A server copy replaces our PUBACK-built one (exact createdAt),
      // unless changes were applied to ours already: then it keeps them.
      if (!older && (!old || (old.local && !m.local && !old.rev))) this.messages.set(m.seq, m);
      else if (!older && old.local && !m.local) Object.assign(old, { createdAt: m.createdAt, local: false });
      this.kinds.set(m.seq, msg);
      // Only messages move the conversation up the inbox (the server's
      // lastMessageAt), so a reload shows the order seen live. The preview
      // is the copy held: our PUBACK-built one (no msgType) handled after
      // the server's event for the same seq must not replace it there.
      const held = (!older && this.messages.get(m.seq)) || m;
      this.noteLast(m.seq, shown ? held : null, msg && !m.local ? m.createdAt : null);
      // Writing anything advances the writer's own watermark (server rule),
      // but a system entry is written on its actor's behalf and does not.
      const writer = writerOf(m);
      if (writer === this.me && !isSystem(m)) this.lastReadSeq = Math.max(this.lastReadSeq, m.seq);
      if (msg && m.senderId !== this.me) this.typing.delete(m.senderId);
    }
    if (!this.loaded) {
      // Not on screen: only the counters and the inbox preview matter.
      // Keep bodies anyway so a load that races with live events does not
      // lose them.
      for (const m of msgs) {
        // A change at or below have may be one applied already, and an
        // older edit applied again would put older text back; but a
        // recall is the last change of its message, so one the inbox's
        // lastSeq passed before its event came still takes the text and
        // files away.
        if (isChange(m) && (m.seq > this.have || m.kind === 'recall')) this.applyToHeld(m);
        this.have = Math.max(this.have, m.seq);
      }
      // Bounded: a busy conversation that is never opened must not grow.
      for (const seq of this.messages.keys()) if (seq <= this.have - KEEP) this.messages.delete(seq);
      return false;
    }
    return this.advance();
  }

  loadLatest(page) {
    // Bodies kept from before the load may sit below a hole (say #5 then
    // #351..#400 after a long absence): the page's range is the window.
    const min = page.length ? page[0].seq : Infinity;
    for (const seq of [...this.messages.keys()]) if (seq < min) this.messages.delete(seq);
    for (const m of page) this.messages.set(m.seq, m);
    for (const m of page) {
      this.kinds.set(m.seq, isMessage(m));
      if (isChange(m)) this.noteLast(m.seq, null, null);
      else this.noteLast(m.seq, m, isMessage(m) ? m.createdAt : null);
    }
    // The page's messages are as they are now; applying its changes in
    // order on top ends at the same state (the last change of each wins).
    for (const m of page) if (isChange(m)) this.applyToHeld(m);
    this.have = page.length ? page[page.length - 1].seq : 0;
    this.loaded = true;
    this.oldest = page.length ? page[0].seq : 0;
    this.hasOlder = this.oldest > 1;
    return this.advance();
  }

  addOlder(page, requested) {
    // Older messages come as they are now; the changes among them are
    // already part of that state and are not applied again.
    const added = new Set();
    for (const m of page) {
      if (m.seq < requested && !this.messages.has(m.seq)) {
        this.messages.set(m.seq, m);
        if (isMessage(m)) added.add(m.seq);
      }
      this.kinds.set(m.seq, isMessage(m));
    }
    // The page may have been read before changes to its messages that came
    // live meanwhile (with no message to change then): they are applied now,
    // in seq order, so the message is as it is now (docs/protocol.md).
    if (added.size) {
      const live = [...this.messages.values()].filter((e) => e.seq >= requested && e.seq <= this.have && isChange(e) && added.has(e.targetSeq));
      for (const ch of live.sort((a, b) => a.seq - b.seq)) applyChange(this.messages.get(ch.targetSeq), ch, this.me);
    }
    if (page.length) this.oldest = Math.min(this.oldest || Infinity, page[0].seq);
    this.hasOlder = page.length > 0 && this.oldest > 1;
  }

  /**
   * Accepts that nothing exists between have and seq (history answered
   * afterSeq=have with a later first message). Defensive: history is
   * gapless today, but a stuck `have` would freeze the view for good.
   */
  skipTo(seq) {
    if (seq > this.have) this.have = seq;
    return this.advance();
  }

  /**
   * Bounds what a tab left open for days holds: a loaded conversation not
   * on screen, or on screen at its newest entries (atBottom), keeps its
   * newest KEEP entries (those below are a scroll back away, as after its
   * first load), and the kinds of entries at or below the read watermark,
   * which no unread count looks at, are forgotten. Each runs when its map
   * has doubled, so a long run of live entries costs little each. One
   * scrolled up keeps what the user may be reading, and a page of older
   * entries on its way (loadingOlder) is not dropped as it lands, nor an
   * entry loaded for a jump the view has yet to show (focusSeq): until it
   * renders the jump, the view still scrolls to the newest entries and
   * says it follows them.
   */
  trim(onScreen) {
    const jumping = this.focusSeq > 0 && this.messages.has(this.focusSeq);
    const followed = this.atBottom && !this.loadingOlder && !jumping;
    if ((!onScreen || followed) && this.loaded && this.messages.size > 2 * KEEP) {
      const floor = this.have - KEEP;
      for (const seq of this.messages.keys()) if (seq <= floor) this.messages.delete(seq);
      if (this.oldest <= floor) {
        this.oldest = floor + 1;
        this.hasOlder = true;
      }
    }
    if (this.kinds.size > this.kindsTrimAt) {
      for (const k of this.kinds.keys()) if (k <= this.lastReadSeq && !this.messages.has(k)) this.kinds.delete(k);
      this.kindsTrimAt = Math.max(2 * KEEP, 2 * this.kinds.size);
    }
  }

  /** Moves `have` over contiguous messages; reports a remaining gap. */
  advance() {
    while (this.messages.has(this.have + 1)) {
      this.have++;
      const e = this.messages.get(this.have);
      if (isChange(e)) this.applyToHeld(e);
    }
    if (this.oldest === 0 && this.have > 0) {
      this.oldest = Math.min(...this.messages.keys());
      this.hasOlder = this.oldest > 1;
    }
    // Own sends that are now shown in their committed place leave the
    // pending list; they keep their clientMsgId as DOM key (no flicker).
    for (const [id, p] of this.pending) {
      if (p.seq !== null && p.seq <= this.have) this.pending.delete(id);
    }
    for (const m of this.messages.values()) {
      if (m.seq <= this.have && this.pending.has(m.clientMsgId)) this.pending.delete(m.clientMsgId);
    }
    return this.lastSeq > this.have || [...this.messages.keys()].some((s) => s > this.have + 1);
  }

  /**
   * Applies a change to its message if held, and to the inbox preview
   * when that is the message (it may be the inbox's own copy).
   */
  applyToHeld(ch) {
    const t = this.messages.get(ch.targetSeq);
    applyChange(t, ch, this.me);
    if (!t || !isMessage(t)) this.followQuotes(ch);
    const last = this.lastMessage;
    if (last && last !== t && last.seq === ch.targetSeq) applyChange(last, ch, this.me);
  }

  /**
   * Keeps the quotes of replies to a message not held (older than what
   * was loaded) as that message is now: recalled after its recall, the new
   * text after its edit, none after one that cleared it (a photo's
   * caption). An edit marked bodyHidden (of a message from before our
   * join: its text is not ours to read) tells nothing and leaves the
   * quote. A held message is quoted as held (quoteOf).
   */
  followQuotes(ch) {
    if (ch.kind !== 'recall' && (ch.kind !== 'edit' || ch.bodyHidden)) return;
    for (const m of this.messages.values()) {
      const ref = m.replyTo;
      if (!isMessage(m) || !ref || ref.seq !== ch.targetSeq || ref.recalled) continue;
      // A recall takes the type with the text; an edit keeps it.
      m.replyTo = ch.kind === 'recall' ? { seq: ref.seq, senderId: ref.senderId, snippet: '', recalled: true } : { ...ref, snippet: snippet(ch.body) };
    }
  }

  /** Messages to show: committed and contiguous, then own pending sends. */
  visible() {
    const out = [];
    for (const m of this.messages.values()) if (m.seq <= this.have && !isChange(m)) out.push(m);
    out.sort((a, b) => a.seq - b.seq);
    return out;
  }

  pendingList() {
    return [...this.pending.values()].filter((p) => p.seq === null || p.seq > this.have);
  }

  /** Our newest committed message on screen: the one "seen" refers to. */
  lastOwnSeq() {
    let best = 0;
    for (const m of this.messages.values()) {
      if (isMessage(m) && m.senderId === this.me && m.seq <= this.have && m.seq > best) best = m.seq;
    }
    return best;
  }

  typingUsers(now) {
    const out = [];
    for (const [uid, until] of this.typing) {
      if (until > now) out.push(uid);
      else this.typing.delete(uid);
    }
    return out.sort((a, b) => a - b);
  }
}
