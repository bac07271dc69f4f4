// Unit tests of the inbox (src/views/inbox.js) on the stand-in DOM: a
// row is kept, by conversation id, while what it shows stays the same,
// so a burst of messages in a large inbox rebuilds the rows of the
// conversations written to, not every row, each frame. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';
import { ChatState } from '../src/store/state.js';

const ME = 1;
const at = (s) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const said = (cid, seq, s, body) => ({ conversationId: cid, seq, kind: 'message', senderId: 2, clientMsgId: `m${cid}-${seq}`, body, createdAt: at(s) });

/** Runs fn(state, inbox, list) on the stand-in DOM: an inbox of n groups, #1 the oldest. */
async function withInbox(n, fn) {
  const undo = fakeDocument();
  try {
    const { createInbox } = await import('../src/views/inbox.js');
    const { h } = await import('../src/views/dom.js');
    const state = new ChatState(ME);
    const entries = Array.from({ length: n }, (_, i) => ({ id: i + 1, type: 'GROUP', title: `G${i + 1}`, lastSeq: 1, lastReadSeq: 1, unread: 0, lastMessageAt: at(i), lastMessage: said(i + 1, 1, i, `hello ${i + 1}`) }));
    state.setInbox(entries);
    const inbox = createInbox(state, { open() {}, newDirect() {}, newGroup() {}, signOut() {}, profile() {}, search: { el: h('div') } });
    inbox.render();
    await fn(state, inbox, inbox.el.find('inbox'));
  } finally {
    undo();
  }
}

/** The nodes render() makes. */
function made(render) {
  let n = 0;
  const d = globalThis.document;
  const real = { createElement: d.createElement, createElementNS: d.createElementNS, createTextNode: d.createTextNode };
  for (const k of Object.keys(real)) d[k] = (...a) => (n++, real[k](...a));
  try {
    render();
  } finally {
    Object.assign(d, real);
  }
  return n;
}

const rows = (list) => list.findAll('conv-row');
const ids = (list) => rows(list).map((b) => Number(b.attrs['data-conv-id']));

test('a new message in one conversation of a 200-conversation inbox rebuilds its row alone: the others stay as they were, in order under it, the focused one focused', () =>
  withInbox(200, (state, inbox, list) => {
    state.setOpen(7);
    inbox.render();
    const before = new Map(rows(list).map((b) => [Number(b.attrs['data-conv-id']), b]));
    before.get(100).focus();
    const n = made(() => {
      state.addMessages(50, [said(50, 2, 500, 'news')]);
      inbox.render();
    });
    assert.deepEqual(ids(list), state.sortedConversations().map((c) => c.id));
    assert.equal(ids(list)[0], 50);
    assert.ok(n <= 20, `${n} nodes made for one conversation's new message (a row is about 12)`);
    const rebuilt = rows(list).filter((b) => b !== before.get(Number(b.attrs['data-conv-id']))).map((b) => Number(b.attrs['data-conv-id']));
    assert.deepEqual(rebuilt, [50], 'rows were rebuilt though nothing they show changed');
    assert.equal(rows(list)[0].find('unread').textContent, '1');
    assert.ok(rows(list).includes(document.activeElement) && document.activeElement === before.get(100), 'the focused row lost focus');
    const open = rows(list).find((b) => b.attrs['aria-current'] === 'true');
    assert.equal(open?.attrs['data-conv-id'], '7', 'the open conversation is no longer marked current');
  }));

test("the focused row, rebuilt for its conversation's new message, hands the focus to its new row; rows of conversations gone leave, new ones come in order", () =>
  withInbox(20, (state, inbox, list) => {
    rows(list).find((b) => b.attrs['data-conv-id'] === '5').focus();
    state.addMessages(5, [said(5, 2, 100, 'news')]);
    inbox.render();
    assert.equal(document.activeElement, rows(list)[0], 'the focus stayed on the row taken away');
    assert.equal(document.activeElement.attrs['data-conv-id'], '5');
    state.setInbox([...state.sortedConversations()].filter((c) => c.id % 2).map((c) => ({ id: c.id, type: 'GROUP', title: c.title, lastSeq: c.lastSeq, lastReadSeq: c.lastReadSeq, unread: c.unread, lastMessageAt: c.lastMessageAt, lastMessage: c.lastMessage })).concat([{ id: 30, type: 'GROUP', title: 'new', lastSeq: 0, lastReadSeq: 0, unread: 0, lastMessageAt: at(50) }]));
    inbox.render();
    assert.deepEqual(ids(list), state.sortedConversations().map((c) => c.id));
    assert.deepEqual(ids(list).slice(0, 3), [5, 30, 19]);
    assert.equal(list.children.length, 11, 'rows of conversations gone stayed');
  }));
