// Unit tests of the conversation view's composer (src/views/conversation.js)
// on the stand-in DOM. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { onPage } from './page.mjs';

/** A group conversation the user owns, with nothing loaded. */
const group = (id) => ({ id, type: 'GROUP', title: `G${id}`, messages: new Map(), visible: () => [], pendingList: () => [], peerId: () => null, typingUsers: () => [], myRole: () => 'owner', lastOwnSeq: () => 0, loaded: true, hasOlder: false });

test('the Enter that commits an input method\'s text (Safari: keyCode 229 after compositionend) does not send the message half written', () =>
  onPage(async (open) => {
    const conv = { id: 5, type: 'DIRECT', messages: new Map(), visible: () => [], peerId: () => 2 };
    const sent = [];
    const state = { openId: 5, me: 1, conv: (id) => (id === 5 ? conv : null) };
    const sync = { send: (cid, body) => sent.push(body), typing() {} };
    const view = open(state, sync);
    const input = view.el.find('composer');
    // Typing Japanese: the input method composes "にほん"; the Enter that
    // picks the characters comes, in Safari, after compositionend, with
    // isComposing false and keyCode 229.
    input.value = 'にほん';
    input.dispatch('keydown', { key: 'Enter', keyCode: 229, isComposing: false, shiftKey: false });
    assert.deepEqual(sent, [], 'the Enter that ended the composition sent the message');
    // The Enter the user then presses sends it.
    input.value = 'にほんご';
    input.dispatch('keydown', { key: 'Enter', keyCode: 13, isComposing: false, shiftKey: false });
    assert.deepEqual(sent, ['にほんご']);
  }));

test('a dialog about the conversation left (Add member, Delete for everyone) closes when another one opens, so it cannot act on the one no longer shown', () =>
  onPage(async (open) => {
    const { openDialog } = await import('../src/views/dialogs.js');
    const { confirmRecall } = await import('../src/views/lifecycle.js');
    const convs = new Map([[5, group(5)], [6, group(6)]]);
    const state = { openId: 5, me: 1, conv: (id) => convs.get(id) ?? null, waits: new Map() };
    const view = open(state);
    view.render();
    // What main.js's Add member opens for group 5.
    const added = [];
    openDialog({ title: 'Add member', submit: 'Add', bound: true, fields: [{ name: 'user', label: 'User id' }], run: async ({ user }) => added.push([5, user]) });
    const recall = confirmRecall();
    assert.equal(document.body.children.length, 2);

    // A click on a notification (or Back) opens group 6 underneath.
    state.openId = 6;
    view.render();
    assert.equal(document.body.children.length, 0, 'a dialog about group 5 stayed open over group 6');
    assert.equal(await recall, false, 'the delete of group 5\'s message is still waiting to be confirmed over group 6');
    assert.deepEqual(added, []);
  }));

test('the dialogs about the open group (Add member, Forward) close when the user is removed from it', () =>
  onPage(async (open) => {
    const { openDialog } = await import('../src/views/dialogs.js');
    const { pickConversation } = await import('../src/views/lifecycle.js');
    const convs = new Map([[5, group(5)]]);
    const state = { openId: 5, me: 1, conv: (id) => convs.get(id) ?? null, waits: new Map(), sortedConversations: () => [...convs.values()] };
    const view = open(state);
    view.render();
    openDialog({ title: 'Add member', submit: 'Add', bound: true, fields: [{ name: 'user', label: 'User id' }], run: async () => {} });
    const picked = pickConversation(state, 'hello');
    assert.equal(document.body.children.length, 2);

    // member.removed: the group leaves the state, and the page shows no
    // conversation (main.js renders the view all the same).
    convs.delete(5);
    state.openId = null;
    view.render();
    assert.equal(document.body.children.length, 0, 'a dialog about the group the user was removed from stayed open');
    assert.equal(await picked, null);
  }));

test('the photo viewer takes the focus, gives it back when closed, and closes when another conversation opens', () =>
  onPage(async (open) => {
    const { openLightbox } = await import('../src/views/attachments.js');
    const convs = new Map([[5, group(5)], [6, group(6)]]);
    const state = { openId: 5, me: 1, conv: (id) => convs.get(id) ?? null, waits: new Map() };
    const view = open(state);
    view.render();
    const thumb = document.createElement('button');
    document.body.appendChild(thumb);
    thumb.focus();
    const cache = { url: () => new Promise(() => {}) };
    openLightbox({ id: 'a1', name: 'view.jpg', width: 800, height: 600 }, cache);
    const box = document.body.find('lightbox');
    assert.ok(box, 'the viewer did not open');
    assert.ok(box.findAll('lightbox-close').includes(document.activeElement), 'the viewer did not take the focus: keys still act on the page under it');
    // Escape closes it; the focus goes back to the thumbnail.
    document.dispatch('keydown', { key: 'Escape' });
    assert.equal(document.body.find('lightbox'), null, 'Escape did not close the viewer');
    assert.equal(document.activeElement, thumb, 'the focus was not given back to the thumbnail');

    openLightbox({ id: 'a1', name: 'view.jpg' }, cache);
    state.openId = 6; // a notification's click opens another conversation
    view.render();
    assert.equal(document.body.find('lightbox'), null, 'the photo of conversation 5 stayed on screen over conversation 6');
  }));

test('a photo open full size closes when its message is deleted for everyone', () =>
  onPage(async (open) => {
    const photo = { conversationId: 5, seq: 1, senderId: 2, clientMsgId: 'c1', body: '', msgType: 'image', createdAt: '2026-01-01T10:00:00Z', attachments: [{ id: 'a1', name: 'view.jpg', contentType: 'image/jpeg', size: 10, width: 800, height: 600 }] };
    const conv = { id: 5, type: 'DIRECT', title: '', messages: new Map([[1, photo]]), visible: () => [photo], pendingList: () => [], peerId: () => 2, typingUsers: () => [], myRole: () => 'member', lastOwnSeq: () => 0, loaded: true, hasOlder: false };
    const state = { openId: 5, me: 1, conv: (id) => (id === 5 ? conv : null), waits: new Map() };
    const cache = { url: () => new Promise(() => {}) };
    const view = open(state, undefined, { uploader: {}, cache });
    view.render();
    const thumb = view.el.find('attachment-image');
    assert.ok(thumb, 'the photo is not shown');
    thumb.parent.dispatch('click');
    assert.ok(document.body.find('lightbox'), 'a click on the photo did not open it full size');

    // The sender deletes it for everyone (message.recalled applied).
    photo.recalled = true;
    photo.body = '';
    delete photo.attachments;
    delete photo.msgType;
    view.render();
    assert.equal(document.body.find('lightbox'), null, 'the deleted photo stays on screen full size');
  }));

test('an edit may clear the text of a photo, not of a text message', () =>
  onPage(async (open) => {
    const photo = { seq: 3, senderId: 1, body: 'at the beach', attachments: [{ id: 'u1', contentType: 'image/jpeg', name: 'a.jpg', size: 9 }], createdAt: '2026-12-06T08:00:00Z' };
    const text = { seq: 4, senderId: 1, body: 'hello', createdAt: '2026-12-06T08:01:00Z' };
    const messages = new Map([[3, photo], [4, text]]);
    let mine = [photo, text];
    const conv = { id: 5, type: 'DIRECT', messages, visible: () => mine, pendingList: () => [], peerId: () => 2, typingUsers: () => [], lastOwnSeq: () => mine.at(-1).seq, loaded: true, hasOlder: false };
    const edits = [];
    const state = { openId: 5, me: 1, conv: (id) => (id === 5 ? conv : null), waits: new Map() };
    const sync = { send() {}, typing() {}, edit: async (cid, seq, body) => edits.push([cid, seq, body]) };
    const view = open(state, sync);
    const input = view.el.find('composer');
    const editLast = (value) => {
      input.value = '';
      input.dispatch('keydown', { key: 'ArrowUp', keyCode: 38, isComposing: false, shiftKey: false });
      input.value = value;
      input.dispatch('keydown', { key: 'Enter', keyCode: 13, isComposing: false, shiftKey: false });
    };
    editLast('  ');
    assert.deepEqual(edits, [], 'the text of a text message was cleared');
    input.dispatch('keydown', { key: 'Escape', keyCode: 27, isComposing: false, shiftKey: false });
    mine = [text, photo];
    editLast('');
    assert.deepEqual(edits, [[5, 3, '']], 'the text of a photo could not be cleared');
  }));

/** A stand-in for the tab's sessionStorage. */
function memoryStorage() {
  const m = new Map();
  return {
    get length() { return m.size; },
    key: (i) => [...m.keys()][i] ?? null,
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
  };
}

test('the text half written in a conversation is still in its composer after another conversation was opened, and after a reload', () =>
  onPage(async (open) => {
    globalThis.sessionStorage = memoryStorage();
    try {
      const convs = new Map([[5, group(5)], [6, group(6)]]);
      const state = { openId: 5, me: 1, conv: (id) => convs.get(id) ?? null, waits: new Map() };
      let view = open(state);
      view.render();
      let input = view.el.find('composer');
      input.value = 'half a thought';
      input.dispatch('input');
      state.openId = 6;
      view.render();
      assert.equal(input.value, '', 'the text written in group 5 showed in group 6');
      state.openId = 5;
      view.render();
      assert.equal(input.value, 'half a thought', 'the text written in group 5 was lost when group 6 was opened');

      // The page reloads (a phone's browser discards the background tab).
      view = open(state);
      view.render();
      input = view.el.find('composer');
      assert.equal(input.value, 'half a thought', 'the text written was lost on reload');

      // Sent, it is no longer a draft; signed out, nothing is kept.
      input.dispatch('keydown', { key: 'Enter', keyCode: 13, isComposing: false, shiftKey: false });
      input.value = 'another';
      input.dispatch('input');
      view.dispose();
      assert.equal(sessionStorage.length, 0, 'a draft outlived the sign-out');
    } finally {
      delete globalThis.sessionStorage;
    }
  }));

test('a text over the server\'s body limit is not sent: the composer says how many characters too long, and sends once shortened', () =>
  onPage(async (open) => {
    const conv = group(5);
    const sent = [];
    const state = { openId: 5, me: 1, conv: (id) => (id === 5 ? conv : null), waits: new Map() };
    // A limit of 10 bytes of UTF-8: "é" takes two.
    const sync = { send: (cid, body) => sent.push(body), typing() {}, maxBodyBytes: () => 10 };
    const view = open(state, sync);
    view.render();
    const input = view.el.find('composer');
    input.value = 'éééééééé'; // 16 bytes: 3 "é" too many
    input.dispatch('input', {});
    input.dispatch('keydown', { key: 'Enter', keyCode: 13, isComposing: false, shiftKey: false });
    assert.deepEqual(sent, [], 'a text over the limit was sent, to be refused too_large');
    const hint = view.el.find('composer-too-long');
    assert.ok(hint && !hint.hidden, 'nothing says the text is too long');
    assert.match(hint.textContent, /3 characters/);
    assert.equal(input.value, 'éééééééé', 'the text left the composer');
    input.value = 'ééééé';
    input.dispatch('input', {});
    assert.ok(hint.hidden, 'the text fits but is still said to be too long');
    input.dispatch('keydown', { key: 'Enter', keyCode: 13, isComposing: false, shiftKey: false });
    assert.deepEqual(sent, ['ééééé']);
  }));

test('a message refused too_large says why on the page, offers no Retry, and puts its text back in the composer to shorten', () =>
  onPage(async (open) => {
    const failed = { clientMsgId: 'a', body: 'a long text', attachments: [], status: 'failed', seq: null, error: 'body is larger than 16384 bytes', tooLarge: true, createdAt: new Date().toISOString() };
    const pending = [failed];
    const conv = { ...group(5), pendingList: () => pending };
    const discarded = [];
    const state = { openId: 5, me: 1, conv: (id) => (id === 5 ? conv : null), waits: new Map() };
    const sync = { send() {}, typing() {}, retry() {}, discard: (cid, id) => discarded.push([cid, id]) };
    const view = open(state, sync);
    view.render();
    const row = view.el.find('message');
    const reason = row.find('failed-reason');
    assert.ok(reason && !reason.hidden, 'the reason is only in a tooltip');
    assert.match(reason.textContent, /too long/i);
    assert.ok(row.find('retry').hidden, 'Retry is offered for a message that can never be accepted');
    const back = row.find('edit-failed');
    assert.ok(back && !back.hidden, 'nothing offers to put the text back in the composer');
    back.dispatch('click', {});
    assert.equal(view.el.find('composer').value, 'a long text');
    assert.deepEqual(discarded, [[5, 'a']], 'the refused message stays on the page beside its text in the composer');
  }));

test('a message shown "Not sent" that chatd commits later turns, in place, into the sent message: one row, no Retry, no reason', () =>
  onPage(async (open) => {
    const { ChatState } = await import('../src/store/state.js');
    const state = new ChatState(1);
    state.setInbox([{ id: 5, type: 'GROUP', title: 'G5', lastSeq: 0, lastReadSeq: 0, unread: 0 }]);
    state.loadLatest(5, []);
    state.setOpen(5);
    const id = '00000000-0000-4000-8000-0000000000a1';
    const createdAt = new Date().toISOString();
    state.addPending(5, { clientMsgId: id, body: 'slow', attachments: [], status: 'sending', seq: null, error: null, createdAt });
    state.failPending(5, id, 'No answer from the server.');
    const retried = [];
    const view = open(state, { send() {}, typing() {}, retry: (cid, m) => retried.push(m) });
    view.render();
    const row = view.el.find('message');
    assert.ok(!row.find('retry').hidden, 'no Retry on the failed send');
    // Its message.new (or PUBACK) comes after all.
    state.addMessages(5, [{ conversationId: 5, seq: 1, kind: 'message', senderId: 1, clientMsgId: id, body: 'slow', createdAt }]);
    view.render();
    const rows = view.el.findAll('message');
    assert.equal(rows.length, 1, 'the message is shown twice');
    assert.equal(rows[0], row, 'the failed row was replaced, not turned');
    assert.equal(row.dataset.status, 'sent');
    assert.ok(row.find('retry').hidden, 'Retry still offered on the sent message');
    assert.ok(row.find('failed-reason').hidden, '"No answer from the server." still shown');
  }));
