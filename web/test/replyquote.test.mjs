// A reply's quote of a message without text (a photo, voice note or file
// sent without a caption) names its type, as the inbox preview does
// (src/views/format.js msgTypeLabel): from the server's
// replyTo.msgType when the client does not hold the quoted message, from
// the message itself when it does; a recall leaves "Message deleted" and
// no type. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';
import { onPage, at, msg, recalled } from './page.mjs';
import { ChatState } from '../src/store/state.js';

const reply = (seq, to, msgType) => msg(seq, 're', { replyTo: { seq: to, senderId: 1, snippet: '', ...(msgType ? { msgType } : {}) } });

test('a quote of a photo, voice note or file without a caption names its type, held or not, until its recall', () =>
  onPage(async (open) => {
    const s = new ChatState(2);
    s.setInbox([{ id: 7, type: 'GROUP', title: 't', lastSeq: 14, lastReadSeq: 14, unread: 0 }]);
    // Seqs 1-3 (a photo, a voice note, a file) are older than the page;
    // 10 is a file the page holds.
    s.loadLatest(7, [
      msg(10, '', { msgType: 'file', attachments: [{ id: 'a', name: 'd.pdf', contentType: 'application/pdf', size: 1 }] }),
      reply(11, 1, 'image'),
      reply(12, 2, 'audio'),
      reply(13, 3, 'file'),
      reply(14, 10, 'file'),
    ]);
    s.openId = 7;
    const view = open(s);
    const quotes = () => {
      view.render();
      return view.el.findAll('reply-quote').filter((e) => !e.hidden).map((e) => e.textContent.replace(/^User 1/, ''));
    };
    assert.deepEqual(quotes(), ['📷 Photo', '🎤 Voice message', '📎 File', '📎 File']);

    s.addMessages(7, [recalled(15, 1), recalled(16, 10)]);
    assert.deepEqual(quotes(), ['Message deleted', '🎤 Voice message', '📎 File', 'Message deleted']);
    const left = s.conv(7).messages.get(11).replyTo;
    assert.equal(left.msgType, undefined, `the recalled photo's quote still holds msgType ${left.msgType}`);
  }));

test('the "Replying to" banner over the composer names the type of a photo, voice note or file without a caption, as its quote will', async () => {
  const undo = fakeDocument();
  try {
    const { composerBanner } = await import('../src/views/lifecycle.js');
    const banner = composerBanner(() => {});
    const shown = (m) => {
      banner.show({ kind: 'reply', who: 'User 1', m });
      return banner.el.querySelector('.banner-text').textContent;
    };
    assert.deepEqual(
      [shown({ body: '', msgType: 'image' }), shown({ body: null, msgType: 'audio' }), shown({ body: '', msgType: 'file' }), shown({ body: 'a caption', msgType: 'image' })],
      ['📷 Photo', '🎤 Voice message', '📎 File', 'a caption'],
    );
  } finally {
    undo();
  }
});
