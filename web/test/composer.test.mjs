// Unit tests of the conversation view's composer (src/views/conversation.js)
// on the stand-in DOM. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';

test('the Enter that commits an input method\'s text (Safari: keyCode 229 after compositionend) does not send the message half written', async () => {
  const undo = fakeDocument();
  globalThis.ResizeObserver = class {
    observe() {}
  };
  try {
    const { createConversationView } = await import('../src/views/conversation.js');
    const conv = { id: 5, type: 'DIRECT', messages: new Map(), visible: () => [], peerId: () => 2 };
    const sent = [];
    const state = { openId: 5, me: 1, conv: (id) => (id === 5 ? conv : null) };
    const sync = { send: (cid, body) => sent.push(body), typing() {} };
    const view = createConversationView(state, sync, { uploader: {}, cache: {} }, { back() {}, addMember() {}, info() {} });
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
  } finally {
    delete globalThis.ResizeObserver;
    undo();
  }
});
