// A recalled message shows nothing of what it said or where it came from:
// a live recall (src/store/lifecycle.js applyChange) takes its quote, its
// forward header and its "edited" off a message the client holds, in the
// model and on the screen (src/views/conversation.js). Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { onPage, at, msg, recalled } from './page.mjs';
import { ChatState } from '../src/store/state.js';

test('a live recall takes the quote, the forward header and "edited" off a message the client holds, in the model and on the screen', () =>
  onPage(async (open) => {
    const s = new ChatState(2);
    s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 4, lastReadSeq: 4, unread: 0 }]);
    s.loadLatest(7, [
      msg(1, 'lunch?'),
      msg(2, 'at noon', { replyTo: { seq: 1, senderId: 1, snippet: 'lunch?' } }),
      msg(3, 'only for us', { forwardedFrom: { conversationId: 9, seq: 4, senderId: 3 } }),
      msg(4, 'hello', { editedAt: at(4) }),
    ]);
    s.openId = 7;
    const view = open(s);
    view.render();
    const shown = (testid) => view.el.findAll(testid).filter((e) => !e.hidden).length;
    assert.deepEqual([shown('reply-quote'), shown('forwarded'), shown('edited')], [1, 1, 1], 'the reply, forward and edit before the recall');

    s.addMessages(7, [recalled(5, 2), recalled(6, 3), recalled(7, 4)]);
    view.render();
    assert.equal(shown('reply-quote'), 0, 'the recalled reply still shows its quote');
    assert.deepEqual([shown('forwarded'), shown('edited')], [0, 0]);
    for (const seq of [2, 3, 4]) {
      const m = s.conv(7).messages.get(seq);
      const left = ['replyTo', 'forwardedFrom', 'editedAt', 'msgType', 'attachments'].filter((k) => m[k] !== undefined);
      assert.equal(m.recalled, true);
      assert.deepEqual(left, [], `recalled message ${seq} still holds ${left.join(', ')}`);
    }
  }));
