// Unit tests of the message lifecycle in the client's model
// (src/store/lifecycle.js, src/store/state.js): edits, recalls and
// reactions are entries with seqs of their own, applied to their message in
// seq order. Plain Node: no browser, no server. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatState } from '../src/store/state.js';
import { applyChange, changeFromEvent, quoteOf } from '../src/store/lifecycle.js';

const ME = 1;
let n = 0;
const id = () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
const at = (seq) => new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString();
const msg = (seq, senderId = 2, body = `m${seq}`, extra = {}) => ({
  conversationId: 7, seq, kind: 'message', senderId, clientMsgId: id(), body, createdAt: at(seq), ...extra,
});
const edit = (seq, targetSeq, body, senderId = 2) => ({ conversationId: 7, seq, kind: 'edit', targetSeq, senderId, clientMsgId: id(), body, editedAt: at(seq), createdAt: at(seq) });
const recall = (seq, targetSeq, actorId = 2) => ({ conversationId: 7, seq, kind: 'recall', targetSeq, actorId, clientMsgId: id(), createdAt: at(seq) });
const react = (seq, targetSeq, userId, emoji, on, count) => ({ conversationId: 7, seq, kind: 'reaction', targetSeq, userId, emoji, on, count, clientMsgId: id(), createdAt: at(seq) });

/** What a member sees: each message's seq, body, state and reactions. */
const view = (c) =>
  c.visible().map((m) => ({
    seq: m.seq,
    body: m.recalled ? null : m.body,
    edited: Boolean(m.editedAt),
    reactions: (m.reactions || []).map((r) => `${r.emoji}${r.count}${r.me ? '*' : ''}`),
  }));

function loaded(lastSeq = 0, page = []) {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq, lastReadSeq: 0, unread: 0 }]);
  s.loadLatest(7, page);
  return { s, c: s.conv(7) };
}

test('changes fill their seq and change their message; they are never rows of their own', () => {
  const { s, c } = loaded(1, [msg(1)]);
  s.addMessages(7, [edit(2, 1, 'fixed'), react(3, 1, ME, '👍', true, 1), react(4, 1, 3, '👍', true, 2), react(5, 1, 3, '❤️', true, 1)]);
  assert.equal(c.have, 5);
  assert.deepEqual(view(c), [{ seq: 1, body: 'fixed', edited: true, reactions: ['👍2*', '❤️1'] }]);
  s.addMessages(7, [react(6, 1, ME, '👍', false, 1), react(7, 1, 3, '❤️', false, 0)]);
  assert.deepEqual(view(c)[0].reactions, ['👍1'], 'our mark gone, an emoji at 0 removed');
  s.addMessages(7, [recall(8, 1)]);
  // Recalled: nothing of it shows, "edited" included (docs/protocol.md "Recall").
  assert.deepEqual(view(c), [{ seq: 1, body: null, edited: false, reactions: [] }]);
  // A recalled message takes no more changes.
  s.addMessages(7, [edit(9, 1, 'back?'), react(10, 1, 3, '👍', true, 1)]);
  assert.deepEqual(view(c), [{ seq: 1, body: null, edited: false, reactions: [] }]);
  assert.equal(c.lastOwnSeq(), 0, 'our reaction is not our message');
});

test('a live recall of a photo leaves it as history reads it: recalled, no type, no files', () => {
  const photo = { id: 'a', name: 'a.jpg', contentType: 'image/jpeg', size: 10, sha256: '00' };
  const { s, c } = loaded(1, [msg(1, 2, '', { msgType: 'image', attachments: [photo] })]);
  s.addMessages(7, [recall(2, 1)]);
  const m = c.visible()[0];
  assert.equal(m.recalled, true);
  assert.equal(m.msgType, undefined, 'nothing tells it was a photo');
  assert.deepEqual(m.attachments || [], []);
});

test('a change above a gap waits for the gap, then applies in seq order', () => {
  const { s, c } = loaded(1, [msg(1)]);
  assert.equal(s.addMessages(7, [edit(3, 1, 'second')]), true, 'gap reported');
  assert.equal(view(c)[0].body, 'm1', 'not applied before #2');
  s.addMessages(7, [edit(2, 1, 'first')]);
  assert.equal(view(c)[0].body, 'second', 'applied #2 then #3');
  // Duplicates (a replay, or history overlapping events) change nothing.
  s.addMessages(7, [edit(2, 1, 'first'), edit(3, 1, 'second')]);
  assert.equal(view(c)[0].body, 'second');
});

test('events shuffled with duplicates and history pages converge to the same view', () => {
  // The server's log: messages, replies, edits, recalls and reactions.
  const log = [];
  const live = new Map(); // seq -> message as it is now (the server's state)
  const reactors = new Map(); // `${seq}|${emoji}` -> Set of users
  let seq = 0;
  const rnd = mulberry32(20);
  const pick = () => {
    const ms = [...live.values()].filter((m) => !m.recalled);
    return ms.length ? ms[Math.floor(rnd() * ms.length)] : null;
  };
  for (let i = 0; i < 300; i++) {
    const r = rnd();
    const user = 1 + Math.floor(rnd() * 3);
    const t = pick();
    let e;
    if (!t || r < 0.35) e = msg(++seq, user, `text ${i}`, t && rnd() < 0.3 ? { replyTo: { seq: t.seq, senderId: t.senderId, snippet: t.body } } : {});
    else if (r < 0.55) e = edit(++seq, t.seq, `edit ${i}`, t.senderId);
    else if (r < 0.62) e = recall(++seq, t.seq, t.senderId);
    else {
      const emoji = ['👍', '❤️', '😂'][Math.floor(rnd() * 3)];
      const key = `${t.seq}|${emoji}`;
      const set = reactors.get(key) || new Set();
      const on = !set.has(user);
      if (on) set.add(user);
      else set.delete(user);
      reactors.set(key, set);
      e = react(++seq, t.seq, user, emoji, on, set.size);
    }
    log.push(e);
    if (e.kind === 'message') live.set(e.seq, structuredClone(e));
    else applyChange(live.get(e.targetSeq), e, ME);
  }
  // History returns messages as they are now, changes as entries.
  const history = log.map((e) => (e.kind === 'message' ? structuredClone(live.get(e.seq)) : structuredClone(e)));

  // A: online throughout, loaded before anything happened; gets every
  // event, in bursts out of order with duplicates, filling gaps from
  // history whenever addMessages reports one.
  const a = loaded(0, []);
  const events = log.map((e) => structuredClone(e));
  for (let i = 0; i < events.length; ) {
    const burst = events.slice(i, i + 1 + Math.floor(rnd() * 6));
    i += burst.length;
    shuffle(burst, rnd);
    if (rnd() < 0.2) burst.push(structuredClone(burst[0]));
    if (a.s.addMessages(7, burst)) {
      // afterSeq=have, in pages of 50, as Sync.fill does.
      for (let k = 0; k < 20 && a.c.have < seq; k++) {
        const from = a.c.have;
        const page = history.filter((h) => h.seq > from && h.seq <= burst.reduce((x, b) => Math.max(x, b.seq), 0)).slice(0, 50);
        if (!page.length) break;
        a.s.addMessages(7, structuredClone(page));
      }
    }
  }
  // B: opens the conversation afterwards; newest page, then older pages.
  const b = new ChatState(ME);
  b.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: seq, lastReadSeq: 0, unread: 0 }]);
  b.loadLatest(7, structuredClone(history.slice(-50)));
  const bc = b.conv(7);
  while (bc.hasOlder) {
    const before = bc.oldest;
    b.addOlder(7, structuredClone(history.filter((h) => h.seq < before).slice(-50)), before);
  }
  // C: offline for the second half, catches up with afterSeq pages.
  const c = loaded(0, []);
  c.s.addMessages(7, structuredClone(log.slice(0, 150)));
  for (let k = 0; k < 20 && c.c.have < seq; k++) {
    const from = c.c.have;
    c.s.addMessages(7, structuredClone(history.filter((h) => h.seq > from).slice(0, 50)));
  }

  const want = [...live.values()].map((m) => ({
    seq: m.seq,
    body: m.recalled ? null : m.body,
    edited: Boolean(m.editedAt),
    reactions: (m.reactions || []).map((r) => `${r.emoji}${r.count}${r.me ? '*' : ''}`),
  }));
  assert.equal(a.c.have, seq);
  assert.deepEqual(view(a.c), want, 'online client');
  assert.deepEqual(view(bc), want, 'client that loaded history afterwards');
  assert.deepEqual(view(c.c), want, 'client that caught up with afterSeq');
  // Replies quote their message as it is now.
  for (const m of a.c.visible().filter((x) => x.replyTo)) {
    const t = live.get(m.replyTo.seq);
    assert.deepEqual(quoteOf(a.c, m), { seq: t.seq, senderId: t.senderId, snippet: t.recalled ? '' : t.body, recalled: !!t.recalled });
  }
});

test('unread counts messages only: edits, recalls and reactions raise no badge', () => {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 10, lastReadSeq: 4, unread: 2 }]);
  const c = s.conv(7);
  assert.equal(c.unread, 2, 'the inbox count, not lastSeq - lastReadSeq');
  s.addMessages(7, [react(11, 9, 2, '👍', true, 1), edit(12, 9, 'x')]);
  assert.equal(c.unread, 2);
  s.addMessages(7, [msg(13)]);
  assert.equal(c.unread, 3);
  s.applyRead(7, ME, 13);
  assert.equal(c.unread, 0);
  s.addMessages(7, [recall(14, 13)]);
  assert.equal(c.unread, 0, 'a recall is not news');
  // Our own change moves our watermark (the server does the same).
  s.addMessages(7, [msg(15), react(16, 15, ME, '👍', true, 1)]);
  assert.equal(c.unread, 0);
});

test('the inbox preview follows edits and recalls of the last message, and keeps its place', () => {
  const s = new ChatState(ME);
  const last = msg(3, 2, 'see you at 5');
  s.setInbox([{ id: 7, type: 'DIRECT', lastSeq: 3, lastReadSeq: 3, unread: 0, lastMessage: last, lastMessageAt: last.createdAt }]);
  const c = s.conv(7);
  s.addMessages(7, [edit(4, 3, 'see you at 6')]);
  assert.equal(c.lastMessage.body, 'see you at 6');
  assert.equal(c.lastMessageAt, last.createdAt, 'an edit does not move the conversation up');
  s.addMessages(7, [recall(5, 3)]);
  assert.equal(c.lastMessage.recalled, true);
  assert.equal(c.lastSeq, 5);
  assert.equal(c.unread, 0);
});

test('a first page with changes shows the messages as they are now', () => {
  // The newest page: #1 as it is now (edited, with reactions), then the
  // entries that made it so.
  const now = msg(1, 2, 'v2', { editedAt: at(3), reactions: [{ emoji: '👍', count: 2, me: true }] });
  const page = [now, edit(2, 1, 'v1.5'), edit(3, 1, 'v2'), react(4, 1, ME, '👍', true, 1), react(5, 1, 3, '👍', true, 2), msg(6, 3, 'reply', { replyTo: { seq: 1, senderId: 2, snippet: 'v2' } })];
  const { c } = loaded(6, page);
  assert.deepEqual(view(c), [
    { seq: 1, body: 'v2', edited: true, reactions: ['👍2*'] },
    { seq: 6, body: 'reply', edited: false, reactions: [] },
  ]);
  assert.equal(c.hasOlder, false);
});

test('our PUBACK-built copy keeps a change applied before the server copy came', () => {
  const { s, c } = loaded(1, [msg(1)]);
  const local = { ...msg(2, ME, 'mine'), local: true };
  s.addMessages(7, [local]);
  s.addMessages(7, [react(3, 2, 3, '🎉', true, 1)]);
  s.addMessages(7, [{ ...local, local: false, createdAt: at(2) }]); // message.new, late
  assert.deepEqual(view(c).at(-1), { seq: 2, body: 'mine', edited: false, reactions: ['🎉1'] });
});

function mulberry32(a) {
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle(xs, rnd) {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
}

test('system entries are shown as notices but are not unread, change no message and do not mark their actor read', () => {
  const { s, c } = loaded(1, [msg(1)]);
  const sys = (seq, senderId) => ({ conversationId: 7, seq, kind: 'system', senderId, action: 'member.added', userId: 4, clientMsgId: id(), createdAt: at(seq) });
  // Our own system entry (we added someone) between others' entries.
  s.addMessages(7, [sys(2, ME), msg(3), sys(4, 3), edit(5, 3, 'm3 fixed'), react(6, 3, 3, '👍', true, 1)]);
  assert.equal(c.have, 6);
  assert.deepEqual(c.visible().map((m) => `${m.kind}:${m.seq}`), ['message:1', 'system:2', 'message:3', 'system:4']);
  assert.equal(c.visible()[2].body, 'm3 fixed');
  assert.equal(c.lastReadSeq, 0, 'a system entry is written on its actor\'s behalf: not a read');
  assert.equal(c.unread, 1, 'message 3 only (the inbox counted none up to seq 1)');
});

test('a reply quotes its message as it is now even when that message is not loaded: recalled after a live recall, the new text after an edit', () => {
  // The newest page only: two replies to older messages the client never loaded.
  const { s, c } = loaded(5, [
    msg(4, 3, 'agreed', { replyTo: { seq: 1, senderId: 2, snippet: 'lunch at 12?' } }),
    msg(5, 3, 'noted', { replyTo: { seq: 2, senderId: 2, snippet: 'the door code is 4711' } }),
  ]);
  s.addMessages(7, [edit(6, 1, 'lunch at 1?'), recall(7, 2)]);
  const [a, b] = c.visible();
  assert.deepEqual(quoteOf(c, a), { seq: 1, senderId: 2, snippet: 'lunch at 1?', recalled: false });
  assert.deepEqual(quoteOf(c, b), { seq: 2, senderId: 2, snippet: '', recalled: true }, 'the recalled text is gone');
});

test('an older page read before a live edit, recall or reaction of one of its messages committed shows that message as it is now', () => {
  // The newest page only (#4, #5); #1..#3 are older and not loaded yet.
  const { s, c } = loaded(5, [msg(4), msg(5)]);
  // The user scrolls up: the older page is read now, but arrives only
  // after these changes to its messages came live (they had no target).
  const stale = [msg(1, 2, 'the door code is 4711'), msg(2, 2, 'lunch at 12?'), msg(3)];
  s.addMessages(7, [recall(6, 1), edit(7, 2, 'lunch at 1?'), react(8, 3, 3, '👍', true, 1)]);
  s.addOlder(7, structuredClone(stale), 4);
  assert.deepEqual(view(c).slice(0, 3), [
    { seq: 1, body: null, edited: false, reactions: [] },
    { seq: 2, body: 'lunch at 1?', edited: true, reactions: [] },
    { seq: 3, body: 'm3', edited: false, reactions: ['👍1'] },
  ]);
  // A page read after the changes (already in it) ends the same.
  const b = loaded(5, [msg(4), msg(5)]);
  b.s.addMessages(7, [recall(6, 1), edit(7, 2, 'lunch at 1?'), react(8, 3, 3, '👍', true, 1)]);
  b.s.addOlder(7, [
    msg(1, 2, '', { recalled: true }),
    msg(2, 2, 'lunch at 1?', { editedAt: at(7) }),
    msg(3, 2, 'm3', { reactions: [{ emoji: '👍', count: 1, me: false }] }),
  ], 4);
  assert.deepEqual(view(b.c), view(c));
});

test('a system entry does not move its conversation up the inbox, live or on opening it: only messages do, as in the server\'s inbox', () => {
  const s = new ChatState(ME);
  const sys = (cid, seq, createdAt) => ({ conversationId: cid, seq, kind: 'system', actorId: 3, action: 'member.left', userId: 3, clientMsgId: id(), createdAt });
  // Group 7's last message is older than direct chat 8's, but its newest
  // entry (#2, someone left) is newer than both.
  s.setInbox([
    { id: 8, type: 'DIRECT', lastSeq: 1, lastReadSeq: 1, unread: 0, lastMessage: { ...msg(1), conversationId: 8 }, lastMessageAt: at(20) },
    { id: 7, type: 'GROUP', title: 't', lastSeq: 2, lastReadSeq: 2, unread: 0, lastMessage: msg(1), lastMessageAt: at(1) },
  ]);
  const order = () => s.sortedConversations().map((c) => c.id);
  assert.deepEqual(order(), [8, 7]);
  s.loadLatest(7, [msg(1), sys(7, 2, at(30))]);
  assert.deepEqual(order(), [8, 7], 'opening the group moved it up');
  s.addMessages(8, [sys(8, 2, at(40))]);
  s.addMessages(7, [sys(7, 3, at(50))]);
  assert.deepEqual(order(), [8, 7], 'a live system entry moved its conversation up');
  // What a reload shows: the same order.
  s.setInbox([
    { id: 8, type: 'DIRECT', lastSeq: 2, lastReadSeq: 2, unread: 0, lastMessage: { ...msg(1), conversationId: 8 }, lastMessageAt: at(20) },
    { id: 7, type: 'GROUP', title: 't', lastSeq: 3, lastReadSeq: 3, unread: 0, lastMessage: msg(1), lastMessageAt: at(1) },
  ]);
  assert.deepEqual(order(), [8, 7]);
  s.addMessages(7, [msg(4, 2, 'm4', { createdAt: at(55) })]);
  assert.deepEqual(order(), [7, 8], 'a message moves it up');
});

test('reading part of a conversation on another device never raises its badge above what the inbox counted', () => {
  const s = new ChatState(ME);
  // Seqs 3..10: 3 messages among reactions and edits, of kinds not known here.
  s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 10, lastReadSeq: 2, unread: 3 }]);
  const c = s.conv(7);
  assert.equal(c.unread, 3);
  s.applyRead(7, ME, 6); // read.updated: read up to #6 on the phone
  assert.ok(c.unread <= 3, `the badge rose from 3 to ${c.unread} after reading`);
});

test('a cleared caption empties the quote of a message not loaded; an edit whose body is hidden from us leaves it', () => {
  // The newest page only: replies to two older photos the client never loaded.
  const replies = () => [
    msg(4, 3, 'nice', { replyTo: { seq: 1, senderId: 2, snippet: 'the view' } }),
    msg(5, 3, 'agreed', { replyTo: { seq: 2, senderId: 2, snippet: 'old words' } }),
  ];
  const want = (c, how) => {
    const [a, b] = c.visible();
    assert.deepEqual(quoteOf(c, a), { seq: 1, senderId: 2, snippet: '', recalled: false }, `${how}: the caption cleared`);
    assert.deepEqual(quoteOf(c, b), { seq: 2, senderId: 2, snippet: 'old words', recalled: false }, `${how}: an edit out of our sight`);
  };
  // Live, as the events topic carries them.
  const live = loaded(5, replies());
  const ev = (seq, targetSeq, extra) => ({ type: 'message.edited', conversationId: 7, seq, targetSeq, senderId: 2, clientMsgId: id(), body: '', editedAt: at(seq), ...extra });
  live.s.addMessages(7, [changeFromEvent(ev(6, 1, {})), changeFromEvent(ev(7, 2, { bodyHidden: true }))]);
  want(live.c, 'live');
  // From history, as a gap fill reads them.
  const hist = loaded(5, replies());
  hist.s.addMessages(7, [edit(6, 1, ''), { ...edit(7, 2, ''), bodyHidden: true }]);
  want(hist.c, 'history');
});

test('an edit whose body is hidden from us leaves a loaded message as we read it; a cleared caption clears it', () => {
  // Loaded during an earlier membership of a group whose history is
  // "joined": after a re-add its edits reach us marked bodyHidden.
  const { s, c } = loaded(3, [msg(1, 2, 'the view'), msg(2, 2, 'the lake'), msg(3, 3, 'nice', { replyTo: { seq: 1, senderId: 2, snippet: 'the view' } })]);
  s.addMessages(7, [{ ...edit(4, 1, ''), bodyHidden: true }, edit(5, 2, '')]);
  assert.deepEqual(view(c), [
    { seq: 1, body: 'the view', edited: false, reactions: [] },
    { seq: 2, body: '', edited: true, reactions: [] },
    { seq: 3, body: 'nice', edited: false, reactions: [] },
  ]);
  assert.deepEqual(quoteOf(c, c.visible()[2]), { seq: 1, senderId: 2, snippet: 'the view', recalled: false });
});
