// Unit tests of how Sync (src/store/sync.js) reads the members of
// conversations (GET /v1/conversations/{id}): only those a row or an
// opened conversation needs, each once while its read is on its way, a
// few at a time, however often the inbox is read. Plain Node, a fake API.
// Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../src/api.js';
import { ChatState } from '../src/store/state.js';
import { Sync } from '../src/store/sync.js';

globalThis.document ??= { visibilityState: 'visible' };

const ME = 1;
const direct = (id, peerId) => ({ id, type: 'DIRECT', peerId, lastSeq: 0, lastReadSeq: 0, unread: 0 });
// A chatd older than the inbox's peerId leaves it out.
const peerless = (id) => ({ id, type: 'DIRECT', lastSeq: 0, lastReadSeq: 0, unread: 0 });
const group = (id) => ({ id, type: 'GROUP', title: `G${id}`, lastSeq: 0, lastReadSeq: 0, unread: 0 });

/**
 * chatd listing entries. Every read of a conversation is noted in reads;
 * while hold is set it waits in held until the test answers it.
 */
function rig(entries) {
  const api = {
    reads: [],
    pages: [], // conversations whose newest page was asked for
    marks: [], // read receipts sent: [cid, seq]
    newest: {}, // conversation id: its newest page, [] when not given
    held: [],
    hold: false,
    refuse: new Set(), // conversations the user is no longer in
    async inbox() {
      return structuredClone(entries);
    },
    conversation(cid) {
      api.reads.push(cid);
      const members = [{ userId: ME, role: 'member', lastReadSeq: 0 }, { userId: 100 + cid, role: 'member', lastReadSeq: 0 }];
      const { peerId, ...d } = entries.find((e) => e.id === cid);
      const answer = () => (api.refuse.has(cid) ? Promise.reject(new ApiError(403, 'not_member', 'not a member')) : Promise.resolve({ ...d, members }));
      if (!api.hold) return answer();
      return new Promise((resolve) => api.held.push({ cid, answer: () => resolve(answer()) }));
    },
    async history(cid) {
      api.pages.push(cid);
      return api.newest[cid] ?? [];
    },
    async markRead(cid, seq) {
      api.marks.push([cid, seq]);
      return { lastReadSeq: seq };
    },
    async seen() {
      return { seenBy: 0, members: 2 };
    },
  };
  const state = new ChatState(ME);
  return { api, state, sync: new Sync(state, api, new EventTarget()) };
}

async function settle() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 2));
}

/** Answers the held reads one by one, the oldest first, until none is left; returns the most held at once. */
async function answerAll(api) {
  let most = api.held.length;
  while (api.held.length) {
    api.held.shift().answer();
    await settle();
    most = Math.max(most, api.held.length);
  }
  return most;
}

test('signing in reads the members of no conversation whose row the inbox tells: a direct chat whose entry names its peer, a group until it is opened', async () => {
  const { api, state, sync } = rig([direct(7, 2), group(8), group(9)]);
  await sync.refreshInbox();
  await settle();
  assert.deepEqual(api.reads, [], 'conversations were read at sign-in');
  assert.equal(state.conv(7).peerId(), 2);
  await sync.open(8);
  assert.deepEqual(api.reads, [8]);
  assert.equal(state.conv(8).members.length, 2, 'the group opened has no members');
  await sync.refreshInbox();
  await settle();
  assert.deepEqual(api.reads, [8], 'an inbox read read the members held again');
});

test('inbox reads in a row read each direct chat without a peer once, at most four at a time; opening one of them reads it at once and only then', async () => {
  const ids = Array.from({ length: 10 }, (_, i) => 10 + i);
  const { api, state, sync } = rig(ids.map(peerless));
  api.hold = true;
  await sync.refreshInbox();
  await sync.refreshInbox();
  await settle();
  assert.deepEqual(api.reads, [10, 11, 12, 13], 'the second inbox read started reads of its own');
  const opened = sync.open(19);
  await settle();
  assert.deepEqual(api.reads, [10, 11, 12, 13, 19], 'the conversation opened waits behind the reads of the inbox');
  const most = await answerAll(api);
  await opened;
  assert.ok(most <= 5, `${most} reads on their way at once`);
  assert.deepEqual([...api.reads].sort((a, b) => a - b), ids, 'a conversation was read twice, or not at all');
  for (const id of ids) assert.equal(state.conv(id).peerId(), 100 + id);
  await sync.refreshInbox();
  await settle();
  assert.equal(api.reads.length, ids.length, 'members held were read again');
});

test('a membership change told while the members are being read reads them again once that read answers, not beside it; one of a group whose members are not held reads nothing', async () => {
  const { api, state, sync } = rig([group(8), group(9)]);
  await sync.refreshInbox();
  await sync.open(8);
  await settle();
  api.reads.length = 0;
  api.hold = true;
  sync.onEvent({ type: 'member.added', conversationId: 8, userId: 5 });
  sync.onEvent({ type: 'member.updated', conversationId: 8, userId: 5, role: 'admin' });
  sync.onEvent({ type: 'system.new', conversationId: 8, seq: 1, action: 'role.changed', userId: 5, role: 'admin' });
  await settle();
  assert.deepEqual(api.reads, [8], 'changes told while a read was on its way read the members beside it');
  await answerAll(api);
  assert.deepEqual(api.reads, [8, 8], 'the changes told while the read was on its way, after it was asked, were not read once after it');
  sync.onEvent({ type: 'member.added', conversationId: 9, userId: 5 });
  sync.onEvent({ type: 'system.new', conversationId: 9, seq: 1, action: 'member.added', userId: 5, role: 'member' });
  await settle();
  assert.deepEqual(api.reads, [8, 8], 'the members of a group never opened were read');
  assert.ok(state.conv(9));
});

test("the entry of the user's removal from a group never opened still has it read, and dropped: its member.removed may have been lost", async () => {
  const { api, state, sync } = rig([group(8), group(9)]);
  await sync.refreshInbox();
  api.refuse.add(9);
  sync.onEvent({ type: 'system.new', conversationId: 9, seq: 1, action: 'member.removed', userId: ME });
  await settle();
  assert.equal(api.reads.at(-1), 9);
  assert.equal(state.conv(9), null, 'the group the user was removed from is still listed');
});

test('opening a group reads its members and its newest page at once: its messages show while the members are on their way', async () => {
  const { api, state, sync } = rig([group(8), group(9)]);
  await sync.refreshInbox();
  api.hold = true;
  const opened = sync.open(8);
  await settle();
  assert.deepEqual(api.reads, [8]);
  assert.deepEqual(api.pages, [8], 'the newest page was asked for only once the members had answered');
  assert.ok(state.conv(8).loaded, 'the messages wait for the members');
  assert.equal(state.conv(8).members, null);
  await answerAll(api);
  await opened;
  assert.equal(state.conv(8).members.length, 2);
  // Opened through its link before the inbox listed it: the page waits
  // for the conversation its read brings, but is asked for beside it.
  const { api: api2, state: state2, sync: sync2 } = rig([group(9)]);
  api2.hold = true;
  const linked = sync2.open(9);
  await settle();
  assert.deepEqual([api2.reads, api2.pages], [[9], [9]], 'the newest page of a conversation opened from its link was asked for only once its members had answered');
  await answerAll(api2);
  await linked;
  assert.ok(state2.conv(9).loaded, 'the page that came before the conversation was lost');
  assert.equal(state2.conv(9).members.length, 2);
});

test('opening a group sends its read receipt once its newest page shows, not after its members come too (a receipt needs no member list)', async () => {
  const { api, state, sync } = rig([{ ...group(8), lastSeq: 2, unread: 2 }]);
  api.newest[8] = [1, 2].map((seq) => ({ conversationId: 8, seq, kind: 'message', senderId: 108, clientMsgId: `c${seq}`, body: `m${seq}`, createdAt: new Date(seq * 1000).toISOString() }));
  await sync.refreshInbox();
  api.hold = true;
  const opened = sync.open(8);
  await settle();
  assert.equal(state.conv(8).have, 2, 'the page is not shown');
  assert.equal(state.conv(8).members, null);
  assert.deepEqual(api.marks, [[8, 2]], 'the read receipt of the messages shown waited for the members');
  assert.equal(state.conv(8).unread, 0);
  await answerAll(api);
  await opened;
  assert.deepEqual(api.marks, [[8, 2]], 'the receipt was sent again once the members came');
  assert.equal(state.conv(8).lastReadSeq, 2, "the members' answer, asked before the receipt, took the user's read back");
  assert.equal(state.conv(8).members.find((m) => m.userId === ME).lastReadSeq, 2, "the user's member entry holds the read of before the receipt");
});
