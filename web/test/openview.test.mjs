// The view of a group opened while its members are on their way (Sync.open
// reads them beside its newest page, src/store/sync.js): its messages
// show, named by sender, and what only the members tell (their count, the
// user's role's Add member) waits for them. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { onPage, msg } from './page.mjs';
import { ChatState } from '../src/store/state.js';

test('a group whose messages came before its members shows them by sender, with no member count nor Add member until the members come', () =>
  onPage(async (open) => {
    const s = new ChatState(2);
    s.setInbox([{ id: 7, type: 'GROUP', title: 'Trip', lastSeq: 2, lastReadSeq: 2, unread: 0 }]);
    s.loadLatest(7, [msg(1, 'hello'), msg(2, 'and you?', { senderId: 3 })]);
    s.openId = 7;
    const view = open(s);
    view.render();
    const shown = () => ({
      bodies: view.el.findAll('message-body').map((e) => e.textContent),
      subtitle: view.el.find('chat-subtitle').textContent,
      add: !view.el.find('add-member').hidden,
    });
    assert.deepEqual(shown(), { bodies: ['hello', 'and you?'], subtitle: 'Group', add: false });
    assert.match(view.el.textContent, /User 1.*User 3/, 'the senders are not named');
    s.setConversation({ id: 7, type: 'GROUP', title: 'Trip', lastSeq: 2, members: [1, 2, 3].map((u) => ({ userId: u, role: u === 2 ? 'owner' : 'member', lastReadSeq: 2 })) });
    view.render();
    assert.deepEqual(shown(), { bodies: ['hello', 'and you?'], subtitle: '3 members', add: true });
  }));
