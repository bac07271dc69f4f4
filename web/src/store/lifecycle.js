// The message lifecycle (docs/protocol.md "Message lifecycle"): edits,
// recalls and reactions are entries of the conversation's stream with a seq
// of their own, like messages. The model keeps them in the same seq map so
// `have` stays gapless, and applies each to its target message when `have`
// passes it: in seq order, exactly once, so a client that catches up from
// history ends with what a client that was online saw. Pure data, no DOM.

/**
 * @typedef {{emoji:string, count:number, me:boolean}} Reaction
 * @typedef {{conversationId:number, seq:number, kind:'edit'|'recall'|'reaction',
 *   targetSeq:number, senderId?:number, actorId?:number, userId?:number,
 *   body?:string, bodyHidden?:boolean, editedAt?:string, emoji?:string, on?:boolean, count?:number}} Change
 */

/** Entries without a kind are messages (older servers, local copies). */
export function isMessage(e) {
  return !e.kind || e.kind === 'message';
}

/** System entries (membership and settings changes) are notices: shown,
 * never unread, and they change no other entry. */
export function isSystem(e) {
  return e.kind === 'system';
}

/** Edits, recalls and reactions: entries that change the message they target. */
export function isChange(e) {
  return !isMessage(e) && !isSystem(e);
}

/** Who wrote an entry: a message's or edit's sender, a recall's actor, a reactor. */
export function writerOf(e) {
  return e.senderId || e.actorId || e.userId || 0;
}

/**
 * Applies a change to the message it targets, in place. Returns whether it
 * changed anything. A recalled message takes no more changes: its body and
 * reactions are gone for good.
 * @param {any} target the message (or undefined when not held)
 * @param {Change} ch
 * @param {number} me the viewer, whose own reactions are marked `me`
 */
export function applyChange(target, ch, me) {
  if (!target || !isMessage(target) || target.recalled) return false;
  switch (ch.kind) {
    case 'edit':
      // Its text is not ours to read (we hold the message from an
      // earlier membership): it stays as we read it, not cleared.
      if (ch.bodyHidden) return false;
      target.body = ch.body ?? '';
      target.editedAt = ch.editedAt || ch.createdAt || target.editedAt || new Date().toISOString();
      break;
    case 'recall':
      eraseRecalled(target);
      break;
    case 'reaction': {
      if (!ch.emoji) return false;
      const list = (target.reactions = [...(target.reactions || [])]);
      let i = list.findIndex((r) => r.emoji === ch.emoji);
      if (i < 0) {
        list.push({ emoji: ch.emoji, count: 0, me: false });
        i = list.length - 1;
      }
      // count is absolute (how many carry it after the change), so
      // applying the same change twice cannot drift.
      const r = (list[i] = { ...list[i], count: Math.max(0, ch.count ?? 0) });
      if (ch.userId === me) r.me = !!ch.on;
      if (r.count === 0) list.splice(i, 1);
      break;
    }
    default:
      return false;
  }
  target.rev = (target.rev || 0) + 1;
  return true;
}

/**
 * Leaves message m as the server shows a recalled message (docs/protocol.md
 * "Recall"): that it was sent, by whom and when; nothing of what it said
 * (body, type, files, reactions, edits) or where it came from (its quote,
 * its forward header).
 */
export function eraseRecalled(m) {
  m.body = '';
  m.recalled = true;
  m.reactions = [];
  for (const k of ['msgType', 'attachments', 'replyTo', 'forwardedFrom', 'editedAt']) delete m[k];
}

/** The first 100 characters of a body, as the server cuts a reply's snippet. */
export function snippet(body) {
  const chars = Array.from(body || '');
  return chars.length > 100 ? chars.slice(0, 100).join('') : body || '';
}

/**
 * The quote of message t (seq) as the client holds it now, as the server
 * quotes it (replyTo): its snippet and type (msgType, none for a text),
 * or recalled and neither.
 */
export function quoteOfMessage(seq, t) {
  if (t.recalled) return { seq, senderId: t.senderId, snippet: '', recalled: true };
  return { seq, senderId: t.senderId, snippet: snippet(t.body), recalled: false, ...(t.msgType ? { msgType: t.msgType } : {}) };
}

/**
 * What a reply shows of the message it quotes: the quoted message as the
 * client holds it now (so an edit or recall shows at once), else the
 * server's quote (a recalled one without a type).
 */
export function quoteOf(c, m) {
  const ref = m.replyTo;
  if (!ref) return null;
  const t = c.messages.get(ref.seq);
  if (t && isMessage(t)) return quoteOfMessage(ref.seq, t);
  if (ref.recalled) return { seq: ref.seq, senderId: ref.senderId, snippet: '', recalled: true };
  return { seq: ref.seq, senderId: ref.senderId, snippet: ref.snippet || '', recalled: false, ...(ref.msgType ? { msgType: ref.msgType } : {}) };
}

/**
 * Turns a lifecycle event (docs/protocol.md "Events") into the entry that
 * history would return for it; null for other types. `slim` marks a large
 * group's reaction.updated, which says only that the seq exists.
 */
export function changeFromEvent(ev) {
  const base = { conversationId: ev.conversationId, seq: ev.seq, targetSeq: ev.targetSeq };
  switch (ev.type) {
    case 'message.edited':
      // bodyHidden: the new text is not ours to read (a message from
      // before our join), not a text cleared; history marks it alike.
      return {
        ...base, kind: 'edit', senderId: ev.senderId, clientMsgId: ev.clientMsgId, body: ev.body ?? '', editedAt: ev.editedAt, createdAt: ev.editedAt,
        ...(ev.bodyHidden === true ? { bodyHidden: true } : {}),
      };
    case 'message.recalled':
      return { ...base, kind: 'recall', actorId: ev.actorId, recalledAt: ev.recalledAt, createdAt: ev.recalledAt };
    case 'reaction.updated':
      return { ...base, kind: 'reaction', userId: ev.userId, emoji: ev.emoji, on: ev.on, count: ev.count, slim: typeof ev.on !== 'boolean' };
    default:
      return null;
  }
}

/**
 * Unread messages between the read watermark and lastSeq. Only messages
 * count (edits, recalls and reactions do not). The inbox gives the exact
 * count at its lastSeq; above it we count the entries we heard of by kind,
 * an entry of unknown kind counting as a message (better a badge too many
 * for a moment than a message missed).
 * @param {import('./state.js').Conversation} c
 */
export function unreadCount(c) {
  const read = c.lastReadSeq;
  if (read >= c.lastSeq) return 0;
  const snap = c.unreadAt;
  let n = 0;
  let from = read;
  if (snap && read < snap.seq) {
    if (read <= snap.read) n += snap.n;
    // Of the snapshot's messages, those after read: no more than it counted.
    else n += Math.min(snap.n, countMessages(c, read, snap.seq));
    from = snap.seq;
  } else if (!snap) {
    return c.lastSeq - read;
  }
  return n + countMessages(c, from, c.lastSeq);
}

/** Messages with seq in (from, to]; unknown kinds count as messages. */
function countMessages(c, from, to) {
  // A long unknown stretch (thousands behind, never opened) is not walked
  // seq by seq: its size is the count, as before entries had kinds.
  if (to - from > 5000) return to - from;
  let n = 0;
  for (let s = from + 1; s <= to; s++) if (c.kinds.get(s) !== false) n++;
  return n;
}
