// Unit tests of the client's ordering rules (src/store/state.js), in plain
// Node: no browser, no server. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatState } from '../src/store/state.js';

const ME = 1;
let n = 0;
const msg = (seq, senderId = 2, body = `m${seq}`) => ({
  conversationId: 7,
  seq,
  senderId,
  clientMsgId: `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`,
  body,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
});
const shown = (c) => c.visible().map((m) => m.seq);

function loaded(lastSeq = 0, page = []) {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'DIRECT', title: '', lastSeq, lastReadSeq: 0 }]);
  s.loadLatest(7, page);
  return { s, c: s.conv(7) };
}

test('in-order messages advance have; duplicates are dropped', () => {
  const { s, c } = loaded();
  const m1 = msg(1), m2 = msg(2);
  assert.equal(s.addMessages(7, [m1]), false);
  assert.equal(s.addMessages(7, [m2, m1, m2]), false);
  assert.deepEqual(shown(c), [1, 2]);
  assert.equal(c.have, 2);
});

test('a gap holds later messages back until history fills it', () => {
  const { s, c } = loaded(1, [msg(1)]);
  assert.equal(s.addMessages(7, [msg(4)]), true, 'gap reported');
  assert.deepEqual(shown(c), [1], 'seq 4 not shown before 2 and 3');
  assert.equal(s.addMessages(7, [msg(2), msg(3)]), false);
  assert.deepEqual(shown(c), [1, 2, 3, 4]);
});

test('the inbox reports loaded conversations that fell behind', () => {
  const { s } = loaded(2, [msg(1), msg(2)]);
  const behind = s.setInbox([{ id: 7, type: 'DIRECT', lastSeq: 5, lastReadSeq: 2 }]);
  assert.deepEqual(behind, [7]);
  assert.equal(s.conv(7).unread, 3);
});

test('unloaded conversations only count: unread never double-counts a replay', () => {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 3, lastReadSeq: 3 }]);
  const m4 = msg(4);
  s.addMessages(7, [m4]);
  s.addMessages(7, [m4]); // replayed after a reconnect
  s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 4, lastReadSeq: 3 }]);
  assert.equal(s.conv(7).unread, 1);
});

test('loading drops kept bodies below the newest page (no hole on screen)', () => {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'DIRECT', lastSeq: 4, lastReadSeq: 0 }]);
  s.addMessages(7, [msg(5)]);
  s.setInbox([{ id: 7, type: 'DIRECT', lastSeq: 400, lastReadSeq: 0 }]);
  const page = Array.from({ length: 50 }, (_, i) => msg(351 + i));
  assert.equal(s.loadLatest(7, page), false);
  const c = s.conv(7);
  assert.deepEqual(shown(c), page.map((m) => m.seq));
  assert.equal(c.hasOlder, true);
  assert.equal(c.oldest, 351);
});

test('a live message racing the first load is kept', () => {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'DIRECT', lastSeq: 2, lastReadSeq: 0 }]);
  const m3 = msg(3);
  s.addMessages(7, [m3]); // arrives while GET history (1..2) is in flight
  assert.equal(s.loadLatest(7, [msg(1), msg(2)]), false);
  assert.deepEqual(shown(s.conv(7)), [1, 2, 3]);
});

test('own send: pending, then committed in place by clientMsgId; sending marks read', () => {
  const { s, c } = loaded(1, [msg(1)]);
  s.addPending(7, { clientMsgId: 'abc', body: 'hi', status: 'sending', seq: null, error: null, createdAt: '' });
  assert.equal(c.pendingList().length, 1);
  const p = c.pending.get('abc');
  p.seq = 2;
  s.addMessages(7, [{ ...msg(2, ME, 'hi'), clientMsgId: 'abc', local: true }]);
  assert.equal(c.pendingList().length, 0);
  assert.deepEqual(shown(c), [1, 2]);
  assert.equal(c.lastReadSeq, 2);
  assert.equal(c.lastOwnSeq(), 2);
  // The server's copy replaces the local one.
  const server = { ...msg(2, ME, 'hi'), clientMsgId: 'abc' };
  s.addMessages(7, [server]);
  assert.equal(c.messages.get(2), server);
});

test('own send acked above a gap stays pending until the gap is filled', () => {
  const { s, c } = loaded(1, [msg(1)]);
  s.addPending(7, { clientMsgId: 'abc', body: 'hi', status: 'sending', seq: null, error: null, createdAt: '' });
  c.pending.get('abc').seq = 3;
  assert.equal(s.addMessages(7, [{ ...msg(3, ME, 'hi'), clientMsgId: 'abc', local: true }]), true);
  assert.equal(c.pendingList().length, 1, 'still shown as pending at the bottom');
  s.addMessages(7, [msg(2)]);
  assert.equal(c.pendingList().length, 0);
  assert.deepEqual(shown(c), [1, 2, 3]);
});

test('a failed send keeps its clientMsgId for Retry', () => {
  const { s, c } = loaded();
  s.addPending(7, { clientMsgId: 'abc', body: 'hi', status: 'sending', seq: null, error: null, createdAt: '' });
  s.failPending(7, 'abc', 'too large');
  assert.equal(c.pending.get('abc').status, 'failed');
  const p = s.retryPending(7, 'abc');
  assert.equal(p.clientMsgId, 'abc');
  assert.equal(p.status, 'sending');
});

test('read watermarks only move forward', () => {
  const { s, c } = loaded(5, [1, 2, 3, 4, 5].map((i) => msg(i)));
  s.applyRead(7, ME, 4);
  s.applyRead(7, ME, 2);
  assert.equal(c.lastReadSeq, 4);
  assert.equal(c.unread, 1);
});

test('typing expires and a message from the typist clears it', () => {
  const { s, c } = loaded();
  s.setTyping(7, 2, Date.now() + 3000);
  s.setTyping(7, ME, Date.now() + 3000); // our own echo is ignored
  assert.deepEqual(c.typingUsers(Date.now()), [2]);
  assert.deepEqual(c.typingUsers(Date.now() + 3001), []);
  s.setTyping(7, 2, Date.now() + 3000);
  s.addMessages(7, [msg(1, 2)]);
  assert.deepEqual(c.typingUsers(Date.now()), []);
});

test('older pages prepend and end at seq 1', () => {
  const { s, c } = loaded(4, [msg(3), msg(4)]);
  assert.equal(c.hasOlder, true);
  s.addOlder(7, [msg(1), msg(2)], 3);
  assert.deepEqual(shown(c), [1, 2, 3, 4]);
  assert.equal(c.hasOlder, false);
});

test('conversations missing from the inbox are dropped (removed from them)', () => {
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'DIRECT', lastSeq: 0, lastReadSeq: 0 }, { id: 8, type: 'GROUP', lastSeq: 0, lastReadSeq: 0 }]);
  s.setInbox([{ id: 8, type: 'GROUP', lastSeq: 0, lastReadSeq: 0 }]);
  assert.deepEqual([...s.conversations.keys()], [8]);
});

test('a replayed message older than the loaded page is shown as it is now: not with the text of a recall replayed after it', () => {
  // Reloaded after a night away with the conversation open: its newest
  // page (#351..#400) comes over HTTP before the persistent session
  // replays the backlog, in which #320 was sent and then recalled (#321).
  const s = new ChatState(ME);
  s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 400, lastReadSeq: 300, unread: 98 }]);
  const page = Array.from({ length: 50 }, (_, i) => msg(351 + i));
  assert.equal(s.loadLatest(7, page), false);
  const c = s.conv(7);
  const recall = { conversationId: 7, seq: 321, kind: 'recall', targetSeq: 320, actorId: 2, clientMsgId: 'r', createdAt: page[0].createdAt };
  s.addMessages(7, [msg(320, 2, 'the door code is 4711'), recall, msg(351)]);
  const text = () => c.visible().filter((m) => !m.recalled).map((m) => m.body);
  assert.ok(!text().includes('the door code is 4711'), 'the recalled text is on screen');
  // Scrolling back brings #301..#350 as they are now.
  const older = Array.from({ length: 50 }, (_, i) => (i === 19 ? { ...msg(320, 2, ''), recalled: true } : i === 20 ? recall : msg(301 + i)));
  s.addOlder(7, older, 351);
  assert.ok(!text().includes('the door code is 4711'), 'the recalled text is on screen after scrolling back');
  assert.equal(c.messages.get(320).recalled, true);
  assert.deepEqual(shown(c), Array.from({ length: 100 }, (_, i) => 301 + i).filter((s) => s !== 321));
});

test('our own voice note\'s event coming before its PUBACK leaves the inbox preview as the server has it, not our copy without its type', () => {
  const { s, c } = loaded(1, [msg(1)]);
  // The event and the PUBACK came in one read: the event is handled first.
  const server = { ...msg(2, ME, ''), msgType: 'voice', attachments: [{ id: 'a1', contentType: 'audio/wav' }] };
  s.addMessages(7, [server]);
  const local = { conversationId: 7, seq: 2, senderId: ME, clientMsgId: server.clientMsgId, body: '', createdAt: server.createdAt, attachments: server.attachments, local: true };
  s.addMessages(7, [local]);
  assert.equal(c.messages.get(2), server);
  assert.equal(c.lastMessage.msgType, 'voice', 'the inbox shows "You: " with nothing after it');
});

test('an inbox listing read before a recall came live does not bring the recalled text back into the preview', () => {
  const s = new ChatState(ME);
  const m5 = msg(5, 2, 'the door code is 4711');
  const listing = (last, m) => [{ id: 7, type: 'DIRECT', title: '', lastSeq: last, lastReadSeq: 0, unread: 1, lastMessage: structuredClone(m), lastMessageAt: m.createdAt }];
  s.setInbox(listing(5, m5));
  const c = s.conv(7);
  // The sender recalls it; the event comes while an inbox read (made
  // before the recall) is on its way.
  const asOf = s.mark();
  s.addMessages(7, [{ conversationId: 7, seq: 6, kind: 'recall', targetSeq: 5, actorId: 2, clientMsgId: 'r', createdAt: m5.createdAt }]);
  assert.equal(c.lastMessage.recalled, true);
  s.setInbox(listing(5, m5), asOf);
  assert.equal(c.lastMessage.recalled, true, 'the recalled message is back in the inbox preview');
  assert.notEqual(c.lastMessage.body, 'the door code is 4711');
  // A listing read after the recall has it, and newer messages replace it.
  const m7 = msg(7, 2, 'sorry');
  s.setInbox(listing(7, m7), s.mark());
  assert.equal(c.lastMessage.body, 'sorry');
});

test('an inbox listing or member list read before a group was renamed live does not put the old name back', () => {
  const s = new ChatState(ME);
  const entry = (title) => ({ id: 7, type: 'GROUP', title, lastSeq: 3, lastReadSeq: 3, unread: 0, avatar: 'old.png' });
  s.setInbox([entry('Climbing')]);
  const c = s.conv(7);
  // Reads on their way while the rename comes live.
  const inboxAsOf = s.mark();
  const membersAsOf = s.mark();
  s.updateConversation({ type: 'conversation.updated', conversationId: 7, title: 'Bouldering', avatar: '' });
  s.setInbox([entry('Climbing')], inboxAsOf);
  assert.equal(c.title, 'Bouldering', 'a listing read before the rename put the old name back');
  assert.equal(c.avatarUrl, null);
  s.setConversation({ ...entry('Climbing'), members: [{ userId: ME, role: 'member', lastReadSeq: 3 }] }, membersAsOf);
  assert.equal(c.title, 'Bouldering', 'a member list read before the rename put the old name back');
  // Read after it: as listed.
  s.setInbox([entry('Crag')], s.mark());
  assert.equal(c.title, 'Crag');
});

test('a member list read before a read on another device (or by another member) came live does not move a read watermark back', () => {
  const { s, c } = loaded(5, [1, 2, 3, 4, 5].map((i) => msg(i)));
  const listing = { id: 7, type: 'DIRECT', lastSeq: 5, members: [{ userId: ME, role: 'member', lastReadSeq: 2 }, { userId: 2, role: 'member', lastReadSeq: 1 }] };
  s.setConversation(listing);
  const asOf = s.mark();
  // read.updated of the user's phone and of the peer, live, while the
  // GET /v1/conversations/7 read before them is on its way.
  s.applyRead(7, ME, 5);
  s.applyRead(7, 2, 4);
  s.setConversation(listing, asOf);
  assert.equal(c.lastReadSeq, 5);
  assert.deepEqual(c.members.map((m) => [m.userId, m.lastReadSeq]), [[ME, 5], [2, 4]], 'a watermark went back to what the older member list said');
});

test('a recall of a message held for a conversation not opened yet drops its text and files, though the inbox told its seq first', () => {
  const s = new ChatState(ME);
  s.setInbox([{ id: 8, type: 'GROUP', lastSeq: 0, lastReadSeq: 0 }]);
  const photo = { conversationId: 8, seq: 1, kind: 'message', senderId: 2, body: 'see this', msgType: 'image', createdAt: 'x', attachments: [{ id: 'a1', name: 'x.jpg', contentType: 'image/jpeg', size: 1 }] };
  s.addMessages(8, [photo]);
  // An inbox read after the recall committed, before its event came.
  s.setInbox([{ id: 8, type: 'GROUP', lastSeq: 2, lastReadSeq: 0 }]);
  s.addMessages(8, [{ conversationId: 8, seq: 2, kind: 'recall', targetSeq: 1, actorId: 2 }]);
  const held = s.conv(8).messages.get(1);
  assert.ok(!held || (held.recalled && !held.attachments && held.body === ''), `the recalled message is kept as it was: ${JSON.stringify(held)}`);
});

test('a conversation loaded once and left for another keeps a bounded window of its newest messages however many come live', () => {
  const { s, c } = loaded(1, [msg(1)]);
  s.setOpen(8); // the user went to another conversation; this tab stays open for days
  for (let seq = 2; seq <= 5000; seq++) {
    s.addMessages(7, [msg(seq)]);
    s.applyRead(7, ME, seq); // read on the user's phone
  }
  assert.ok(c.messages.size <= 400, `it holds ${c.messages.size} messages`);
  assert.ok(c.kinds.size <= 400, `it holds the kinds of ${c.kinds.size} entries`);
  // Opened again: the newest messages, contiguous, and the older ones a scroll away.
  s.setOpen(7);
  const seqs = shown(c);
  assert.equal(seqs[seqs.length - 1], 5000);
  assert.equal(seqs[0], c.oldest);
  assert.equal(seqs.length, 5000 - c.oldest + 1, 'a hole in the window');
  assert.equal(c.hasOlder, true);
  const before = c.oldest;
  s.addOlder(7, [msg(before - 2), msg(before - 1)], before);
  assert.deepEqual(shown(c).slice(0, 3), [before - 2, before - 1, before]);
});
