// Unit tests of the service worker (src/sw.js as built into static/sw.js), run in a VM context
// with stand-ins for its global scope: the registration's notifications,
// the window clients and the Cache Storage the page shares with it.
// Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

const SOURCE = readFileSync(new URL('../static/sw.js', import.meta.url), 'utf8');

/** Cache Storage over Maps, as the page and the worker share it. */
function memoryCaches() {
  const all = new Map();
  return {
    async open(name) {
      if (!all.has(name)) all.set(name, new Map());
      const m = all.get(name);
      const key = (r) => new URL(typeof r === 'string' ? r : r.url, 'http://chatd.test/').href;
      return {
        async put(r, res) {
          m.set(key(r), await res.text());
        },
        async match(r) {
          const body = m.get(key(r));
          return body === undefined ? undefined : new Response(body);
        },
        async delete(r) {
          return m.delete(key(r));
        },
      };
    },
  };
}

/** The worker of a browser whose page is closed: handlers, what it showed. */
function worker(caches) {
  const handlers = {};
  const shown = [];
  const self = {
    addEventListener: (type, fn) => (handlers[type] = fn),
    skipWaiting() {},
    clients: { claim: async () => {}, matchAll: async () => [] },
    registration: {
      async showNotification(title, opts) {
        shown.push({ title, ...opts });
      },
      // The notifications on screen: the last shown of each tag, unless closed.
      async getNotifications({ tag } = {}) {
        const last = new Map();
        for (const n of shown) last.set(n.tag, n);
        return [...last.values()].filter((n) => !n.closed && (!tag || n.tag === tag)).map((n) => Object.assign(n, { close: () => (n.closed = true) }));
      },
    },
    navigator: {},
    caches,
    location: { origin: 'http://chatd.test' },
  };
  vm.runInNewContext(SOURCE, { self, URL, Response, console });
  const push = async (payload) => {
    let done;
    handlers.push({ data: { json: () => payload }, waitUntil: (p) => (done = p) });
    await done;
  };
  return { push, shown };
}

/**
 * Runs body with user signed in at this browser (null: no one) and a
 * service worker over the same caches: body gets the worker and
 * rememberSignIn, to sign someone else in meanwhile.
 */
async function signedIn(user, body) {
  const caches = memoryCaches();
  const { rememberSignIn } = await import('../src/push.js');
  globalThis.caches = caches;
  try {
    await rememberSignIn(user);
    await body(worker(caches), rememberSignIn);
  } finally {
    delete globalThis.caches;
  }
}

test('a push for a user who signed out of this browser (delivered late, or the subscription kept for whoever signs in next) is not shown', () =>
  signedIn(7, async (sw, rememberSignIn) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 1, count: 1, title: 'Ann' });
    assert.equal(sw.shown.length, 1, 'the signed-in user\'s push was not shown');
    // Signed out: no one is signed in at this browser now.
    await rememberSignIn(null);
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 2, count: 1, title: 'Ann', body: 'for your eyes only' });
    assert.equal(sw.shown.length, 1, 'a push of the user who signed out was shown');
    // Another user signed in: the one before's pushes are not theirs to read.
    await rememberSignIn(8);
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 3, count: 1, title: 'Ann' });
    assert.equal(sw.shown.length, 1, 'a push of the user signed in before was shown to the user signed in now');
  }));

test('a pushed notification showing the message\'s text says so, so that the page replaces it when the message is edited', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 4, count: 1, title: 'Ann', body: 'meet at 5, pin 4711' });
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 2, title: 'Ann' });
    // The page's showEdited (src/push.js) replaces only a notification
    // whose data.text is set: the edited text (or a cleared caption)
    // must not leave the old one on the screen.
    assert.deepEqual(
      sw.shown.map((n) => [n.body, n.data.seq, n.data.text]),
      [
        ['meet at 5, pin 4711', 4, true],
        ['2 new messages', 5, false],
      ],
    );
  }));

// 7 signed out and 8 signed in, both members of conversation 3; 7's
// subscription is kept, so 7's pushes still reach this browser.
test('a remove for the user signed in before leaves the notification of the one signed in now', () =>
  signedIn(8, async (sw) => {
    await sw.push({ type: 'message', userId: 8, conversationId: 3, seq: 6, count: 1, title: 'Team', body: 'for 8' });
    // 7's notification of a message 8 has read showed it; it was recalled.
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 4, badge: 0 });
    assert.equal(sw.shown[0].closed, undefined, "7's remove closed 8's notification");
    await sw.push({ type: 'remove', userId: 8, conversationId: 3, seq: 6, badge: 0 });
    assert.equal(sw.shown[0].closed, true, "8's remove left 8's notification");
  }));

/** The notification on screen of conversation 3 (the last shown of its tag), unless closed: [title, body, count] */
const onScreen = (sw) => {
  const n = sw.shown.findLast((x) => x.tag === 'conv-3');
  return n && !n.closed ? [n.title, n.body, n.data.count] : null;
};

test('a recall of one of the messages a notification stands for shows it again, silently, with the rest; a recall of the last closes it', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 9, count: 3, title: 'Team' });
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 8, badge: 2 });
    assert.deepEqual(onScreen(sw), ['Team', '2 new messages', 2], 'a recall of one of three messages took all three off the screen');
    const again = sw.shown.at(-1);
    assert.ok(again.silent && !again.renotify, 'showing the rest alerted the user again');
    // chatd sends a remove at most once more (a crash): the same recall counts once.
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 8, badge: 2 });
    assert.deepEqual(onScreen(sw), ['Team', '2 new messages', 2]);
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 9, badge: 1 });
    assert.deepEqual(onScreen(sw), ['Team', 'New message', 1]);
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 7, badge: 0 });
    assert.equal(onScreen(sw), null, 'the notification of a message recalled stayed');
  }));

test("a recall of the message whose text a notification shows takes the text away and keeps the rest; of another message, keeps the text", () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 3, title: 'Ann', body: 'meet at 5, pin 4711' });
    // The page shows the message's edit in it (src/push.js showEdited).
    const edited = sw.shown.at(-1);
    sw.shown.push({ ...edited, body: 'meet at 5', data: { ...edited.data } });
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 4, badge: 2 });
    assert.deepEqual(onScreen(sw), ['Ann', 'meet at 5', 2], 'the text before the edit is back');
    assert.equal(sw.shown.at(-1).data.text, true, 'the page would leave the text when the message is edited');
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 5, badge: 1 });
    assert.deepEqual(onScreen(sw), ['Ann', 'New message', 1], 'the recalled text stayed on the screen');
    assert.equal(sw.shown.at(-1).data.text, false);
  }));

test("a notification titled by its count (chatd's title without a group's) is titled by what is left after a recall", () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 3, title: '3 new messages' });
    assert.deepEqual(onScreen(sw), ['3 new messages', 'Open the conversation to read it.', 3]);
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 5, badge: 2 });
    assert.deepEqual(onScreen(sw), ['2 new messages', 'Open the conversation to read it.', 2]);
  }));

test('a remove of several recalls (they waited together) takes every one of them out of the notification, not only the newest', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 9, count: 3, title: 'Team', body: 'and bring the keys' });
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 9, seqs: [8, 9], badge: 1 });
    assert.deepEqual(onScreen(sw), ['Team', 'New message', 1], 'the notification still counts a recalled message');
    // Sent once more: the same recalls count once.
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 9, seqs: [8, 9], badge: 1 });
    assert.deepEqual(onScreen(sw), ['Team', 'New message', 1]);
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 7, seqs: [7], badge: 0 });
    assert.equal(onScreen(sw), null, 'the notification of messages all recalled stayed');
  }));

test('an update push shows the edited text, silently, in the notification that shows the message; of another message or of a count, it changes nothing', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 2, title: 'Ann', body: 'meet at 5, pin 4711' });
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 5, body: 'meet at 5', badge: 2 });
    assert.deepEqual(onScreen(sw), ['Ann', 'meet at 5', 2], 'the text before the edit stayed on the screen');
    const again = sw.shown.at(-1);
    assert.ok(again.silent && !again.renotify, 'the update alerted the user again');
    assert.equal(again.data.text, true, 'a later edit or recall would leave the new text');
    // An edit of an older message: the notification does not show its text.
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 4, body: 'older, fixed', badge: 2 });
    assert.deepEqual(onScreen(sw), ['Ann', 'meet at 5', 2]);
    // The recall of the message after its edit takes the new text away too.
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 5, badge: 1 });
    assert.deepEqual(onScreen(sw), ['Ann', 'New message', 1]);
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 5, body: 'late', badge: 1 });
    assert.deepEqual(onScreen(sw), ['Ann', 'New message', 1], 'an update put a recalled message\'s text back');
  }));

test('an update of an older edit than the text a notification shows (push services keep no order between updates) leaves the newer text', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 1, title: 'Ann', body: 'meet at 5, pin 4711' });
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 5, editSeq: 9, body: 'meet at 6', badge: 1 });
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 5, editSeq: 8, body: 'meet at 5', badge: 1 });
    assert.deepEqual(onScreen(sw), ['Ann', 'meet at 6', 1], "the first edit's update, come last, put its older text back");
    // A push that previews an edited text: an update of an edit before it changes nothing.
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 10, count: 1, title: 'Ann', body: 'see you at 7', editSeq: 12 });
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 10, editSeq: 11, body: 'see you at 8', badge: 1 });
    assert.deepEqual(onScreen(sw), ['Ann', 'see you at 7', 1], 'an older edit replaced the text the push previewed');
    // Without an editSeq (a chatd before it): shown as ever.
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 10, body: 'see you at 9', badge: 1 });
    assert.deepEqual(onScreen(sw), ['Ann', 'see you at 9', 1]);
  }));

test('an update push that comes before or without the notification it names shows nothing; the notification after it alerts as ever', () =>
  signedIn(7, async (sw) => {
    // An update has no Topic: a push service may deliver it alone, or
    // before the notification it held for this browser while offline.
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 5, body: 'meet at 5', badge: 1 });
    assert.equal(sw.shown.length, 0, 'an update showed a notification of its own');
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 1, title: 'Ann', body: 'meet at 5, pin 4711' });
    assert.deepEqual(onScreen(sw), ['Ann', 'meet at 5, pin 4711', 1]);
    assert.ok(sw.shown.at(-1).renotify && !sw.shown.at(-1).silent, 'the notification after the update did not alert');
  }));

test("an update for the user signed in before closes their notification's old text rather than showing the new one to the user signed in now", () =>
  signedIn(7, async (sw, rememberSignIn) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 1, title: 'Ann', body: 'pin 4711' });
    await rememberSignIn(8);
    await sw.push({ type: 'update', userId: 7, conversationId: 3, seq: 5, body: 'pin removed', badge: 0 });
    assert.equal(onScreen(sw), null, 'the old text stayed, or the new one was shown');
    assert.ok(!sw.shown.some((n) => n.body === 'pin removed'));
  }));

test('a message push delivered twice, or after the push of a newer message (push services keep no order, and retry), neither alerts again nor puts the older message back', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 2, title: 'Ann', body: 'newer' });
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 2, title: 'Ann', body: 'newer' });
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 4, count: 1, title: 'Ann', body: 'older' });
    assert.deepEqual(sw.shown.map((n) => [n.body, n.data.seq]), [['newer', 5]]);
    // Another conversation's, and the next message of this one, alert.
    await sw.push({ type: 'message', userId: 7, conversationId: 9, seq: 1, count: 1, title: 'Bo', body: 'hi' });
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 6, count: 3, title: 'Ann', body: 'newest' });
    assert.deepEqual(sw.shown.map((n) => [n.body, n.data.seq, n.renotify]), [['newer', 5, true], ['hi', 1, true], ['newest', 6, true]]);
  }));

test('a message push delivered again after its notification went (a recall closed it, or the user dismissed it) neither alerts again nor shows the recalled message', () =>
  signedIn(7, async (sw) => {
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 1, title: 'Ann', body: 'oops' });
    await sw.push({ type: 'remove', userId: 7, conversationId: 3, seq: 5, badge: 0 });
    assert.equal(sw.shown[0].closed, true, 'the remove left the notification');
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 5, count: 1, title: 'Ann', body: 'oops' });
    assert.deepEqual(sw.shown.map((n) => n.body), ['oops'], 'the push delivered again showed the recalled message');
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 6, count: 1, title: 'Ann', body: 'seen' });
    sw.shown[1].closed = true; // the user dismissed it
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 6, count: 1, title: 'Ann', body: 'seen' });
    assert.deepEqual(sw.shown.map((n) => n.body), ['oops', 'seen'], 'the push delivered again alerted for what the user dismissed');
    // The next message, and another user's of the same conversation, alert.
    await sw.push({ type: 'message', userId: 7, conversationId: 3, seq: 7, count: 1, title: 'Ann', body: 'next' });
    assert.deepEqual(sw.shown.map((n) => n.body), ['oops', 'seen', 'next']);
  }));
