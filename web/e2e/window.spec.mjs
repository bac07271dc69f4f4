// The conversation on screen in a tab left open for days: followed at its
// newest message, it keeps a bounded window of its newest messages (the
// rows scrolled past go) and stays at the bottom; scrolled up, what the
// user reads stays in place, however many messages come; scrolling up
// loads what went, in order. In headless Chromium against a real chatd;
// web/browser_test.go (TestBrowserE2E) starts chatd and runs this file.
//
// Env: CHATD_URL, CHROMIUM_PATH.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSpec, eventually, finish, openDirect } from './helpers.mjs';

const spec = browserSpec();
const { sendAs } = spec;

const ME = 9351;
const PEER = 9352;

const seqsFrom = (first, last) => Array.from({ length: last - first + 1 }, (_, i) => first + i);

/**
 * The message list of page: the seqs of its rows, top to bottom, how far
 * it is scrolled from its bottom, and the first row on screen (its seq
 * and its top, in px from the list's top edge).
 */
const list = (page) =>
  page.getByTestId('messages').evaluate((el) => {
    const rows = [...el.querySelectorAll('.msg[data-seq]')];
    const edge = el.getBoundingClientRect().top;
    const first = rows.find((r) => r.getBoundingClientRect().bottom > edge);
    return {
      seqs: rows.map((r) => Number(r.dataset.seq)),
      fromBottom: el.scrollHeight - el.scrollTop - el.clientHeight,
      first: first && { seq: Number(first.dataset.seq), top: first.getBoundingClientRect().top - edge },
    };
  });

test('the conversation on screen keeps its newest messages only while followed at the bottom, stays there, and loads what went on a scroll up', async () => {
  const { conv, a } = await openDirect(spec, ME, PEER, [[PEER, 'message 1']]);
  let sent = 1;
  // Twenty at a time, from both members, under chatd's 50 requests per
  // second of a user: the seqs are checked, not the order of the bodies.
  const sendUpTo = async (last) => {
    while (sent < last) {
      const n = Math.min(20, last - sent);
      const pace = new Promise((r) => setTimeout(r, 220));
      await Promise.all(Array.from({ length: n }, (_, i) => sendAs(i % 2 ? ME : PEER, conv.id, `message ${sent + i + 1}`)));
      await pace;
      sent += n;
    }
    await eventually(async () => assert.equal((await list(a.page)).seqs.at(-1), last));
  };

  // Followed at the bottom: the rows scrolled past go, the newest stays in view.
  await sendUpTo(450);
  let v = await list(a.page);
  assert.ok(v.seqs.length <= 400, `${v.seqs.length} messages on screen: the conversation followed at its newest is not trimmed`);
  assert.deepEqual(v.seqs, seqsFrom(v.seqs[0], 450), 'a hole in the messages on screen');
  assert.ok(v.fromBottom < 60, `trimmed, the list is ${v.fromBottom} px from its newest message`);

  // Scrolled up to read: nothing goes, and the row read stays in place.
  await a.page.getByTestId('messages').evaluate((el) => (el.scrollTop = el.scrollHeight / 2));
  await eventually(async () => assert.ok((await list(a.page)).fromBottom >= 60));
  const reading = (await list(a.page)).first;
  await sendUpTo(700);
  v = await list(a.page);
  assert.deepEqual(v.seqs, seqsFrom(v.seqs[0], 700), 'a hole in the messages on screen');
  assert.ok(v.seqs[0] <= reading.seq, `the messages the user was reading went: the list starts at #${v.seqs[0]}, they read #${reading.seq}`);
  assert.deepEqual(v.first, reading, 'the row the user was reading moved');

  // Back at the bottom: the next message trims again.
  await a.page.getByTestId('messages').evaluate((el) => (el.scrollTop = el.scrollHeight));
  await eventually(async () => assert.ok((await list(a.page)).fromBottom < 60));
  await sendUpTo(701);
  await eventually(async () => assert.ok((await list(a.page)).seqs.length <= 400, 'back at the bottom, the list is not trimmed'));
  assert.ok((await list(a.page)).fromBottom < 60);

  // Scrolling up loads what went, in order, to the first message.
  await eventually(
    async () => {
      await a.page.getByTestId('messages').evaluate((el) => (el.scrollTop = 0));
      assert.equal((await list(a.page)).seqs[0], 1);
    },
    { timeout: 60000, interval: 300 },
  );
  assert.deepEqual((await list(a.page)).seqs, seqsFrom(1, 701));
  await finish(a);
});
