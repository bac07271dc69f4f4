// End-to-end tests of the message lifecycle in the web client (issue 20):
// replies, forwards, edits, delete for everyone and reactions, each live
// (events) and after a reload (history), in a real headless Chromium
// against a real chatd. web/browser_test.go runs this after chat.spec.mjs
// on the same chatd; by hand:
//
//   CHATD_URL=http://127.0.0.1:8080 node web/e2e/lifecycle.spec.mjs
//
// Env as chat.spec.mjs; SCREENSHOT_DIR receives lifecycle.png. Every
// scenario uses user ids of its own (2001 and up; 5-7 for the screenshot),
// none of chat.spec.mjs's.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { actions, browserSpec, bodies, bubble, devSignIn, eventually, finish, offline, online, openConversation, row, send, stays, unread } from './helpers.mjs';
import { startProxy } from './proxy.mjs';

const spec = browserSpec();
const { BASE, pages, api, sendAs } = spec;
const SHOTS = process.env.SCREENSHOT_DIR || '';

// ---------------------------------------------------------------- helpers

const sendVia = async (uid, cid, body, extra = {}) =>
  (await sendAs(uid, cid, body, extra)).seq;
const editVia = (uid, cid, seq, body) => api(uid, 'PATCH', `/v1/conversations/${cid}/messages/${seq}`, { clientMsgId: crypto.randomUUID(), body });
const recallVia = (uid, cid, seq) => api(uid, 'DELETE', `/v1/conversations/${cid}/messages/${seq}`);
const reactVia = (uid, cid, seq, emoji, on = true) => api(uid, on ? 'PUT' : 'DELETE', `/v1/conversations/${cid}/messages/${seq}/reactions/${encodeURIComponent(emoji)}`);

/** A fresh browser context (a separate person) signed in through the dev form. */
const signIn = (uid, { base = BASE, ...opts } = {}) => devSignIn(spec.browser, pages, uid, { base, ...opts });

/** Reloads and opens the conversation again: what history alone shows. */
async function reloadInto(page, cid) {
  await page.reload();
  await online(page);
  await openConversation(page, cid);
}

/** A message's reactions as "emoji count" strings, "*" marking our own. */
const reactions = (page, text) =>
  bubble(page, text)
    .getByTestId('reaction')
    .evaluateAll((els) => els.map((e) => `${e.dataset.emoji} ${e.querySelector('.reaction-count').textContent}${e.getAttribute('aria-pressed') === 'true' ? '*' : ''}`));

/** Whether el is inside the message list's visible area. */
async function inView(page, locator) {
  const box = await locator.boundingBox();
  const view = await page.getByTestId('messages').boundingBox();
  return Boolean(box && view && box.y >= view.y - 1 && box.y + box.height <= view.y + view.height + 1);
}

// -------------------------------------------------------------- scenarios

test('reply: the quote shows above the bubble and clicking it scrolls to the quoted message, also one not loaded yet', async () => {
  const direct = await api(2001, 'POST', '/v1/direct/2002');
  const cid = direct.id;
  await sendVia(2001, cid, 'Which train are we taking?');
  for (let i = 1; i <= 79; i++) await sendVia(i % 2 ? 2002 : 2001, cid, `chatter ${i}`);
  // #81 replies to #1: beyond the first page of 50.
  await sendVia(2002, cid, 'The 8:15, platform 2', { replyTo: 1 });

  const a = await signIn(2001);
  const b = await signIn(2002);
  await openConversation(a.page, cid);
  await openConversation(b.page, cid);
  const reply = bubble(a.page, 'The 8:15, platform 2');
  await reply.waitFor();
  const quote = reply.getByTestId('reply-quote');
  assert.equal(await quote.textContent(), 'YouWhich train are we taking?', 'the quote names the author and quotes the text');
  // The quote sits above the bubble.
  const qb = await quote.boundingBox(), bb = await reply.locator('.bubble').boundingBox();
  assert.ok(qb.y + qb.height <= bb.y + 1, 'quote above the bubble');

  await quote.click();
  const original = bubble(a.page, 'Which train are we taking?');
  await original.waitFor();
  await eventually(async () => assert.ok(await inView(a.page, original), 'the quoted message scrolled into view'));

  // B replies through the UI to a recent message of A's; A sees it live.
  const menu = await actions(b.page, 'chatter 78');
  await menu.getByRole('menuitem', { name: 'Reply' }).click();
  await eventually(async () => assert.equal(await b.page.getByTestId('composer-banner').isVisible(), true));
  assert.match(await b.page.getByTestId('composer-banner').textContent(), /Replying to User 2001.*chatter 78/);
  await send(b.page, 'agreed, see you there');
  await eventually(async () => assert.equal(await b.page.getByTestId('composer-banner').isVisible(), false));
  for (const [p, who] of [[a.page, 'You'], [b.page, 'User 2001']]) {
    await eventually(async () => assert.equal(await bubble(p, 'agreed, see you there').getByTestId('reply-quote').textContent(), `${who}chatter 78`));
  }

  // After a reload, history alone shows both quotes.
  await reloadInto(a.page, cid);
  await eventually(async () => assert.equal(await bubble(a.page, 'agreed, see you there').getByTestId('reply-quote').textContent(), 'Youchatter 78'));
  assert.equal(await bubble(a.page, 'The 8:15, platform 2').getByTestId('reply-quote').textContent(), 'YouWhich train are we taking?');
  await finish(a, b);
});

test('forward: pick another conversation; the copy arrives there marked "Forwarded", live and after reload', async () => {
  const direct = await api(2011, 'POST', '/v1/direct/2012');
  const group = await api(2011, 'POST', '/v1/conversations', { type: 'group', title: 'Ops room', members: [2013] });
  await sendVia(2012, direct.id, 'The deploy key rotates on Friday');

  const a = await signIn(2011);
  const c = await signIn(2013);
  await openConversation(a.page, direct.id);
  await openConversation(c.page, group.id);

  const menu = await actions(a.page, 'The deploy key rotates on Friday');
  await menu.getByRole('menuitem', { name: 'Forward' }).click();
  const dlg = a.page.getByTestId('dialog');
  await dlg.getByText('The deploy key rotates on Friday').waitFor();
  await a.page.getByTestId('forward-filter').fill('ops');
  await eventually(async () => assert.deepEqual(await dlg.getByTestId('forward-target').allTextContents(), ['OROps room']));
  await dlg.locator(`[data-testid=forward-target][data-conv-id="${group.id}"]`).click();
  await dlg.waitFor({ state: 'detached' });
  await eventually(async () => assert.equal(await a.page.getByTestId('toast').textContent(), 'Message forwarded to Ops room.'));

  const copy = bubble(c.page, 'The deploy key rotates on Friday');
  await copy.waitFor();
  assert.equal(await copy.getByTestId('forwarded').isVisible(), true);
  assert.equal(await copy.locator('.sender').textContent(), 'User 2011', 'the forwarder sent the copy');
  await reloadInto(c.page, group.id);
  await eventually(async () => assert.equal(await bubble(c.page, 'The deploy key rotates on Friday').getByTestId('forwarded').isVisible(), true));
  // The original is unchanged and not marked.
  assert.equal(await bubble(a.page, 'The deploy key rotates on Friday').getByTestId('forwarded').isVisible(), false);
  await finish(a, c);
});

// A 40×30 orange PNG.
const TINY_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAACgAAAAeCAIAAADRv8uKAAAAK0lEQVR42u3NMQ0AAAgDsAlDGBKRhQw4mvRvputExGKxWCwWi8VisVj8N15LdPWbT+GMHQAAAABJRU5ErkJggg==',
  'base64',
);

test('forward a photo: the copy carries the picture to members who are not in its source, live and after reload', async () => {
  const direct = await api(2041, 'POST', '/v1/direct/2042');
  const group = await api(2041, 'POST', '/v1/conversations', { type: 'group', title: 'Photo wall', members: [2043] });
  const a = await signIn(2041);
  const c = await signIn(2043);
  await openConversation(a.page, direct.id);
  await openConversation(c.page, group.id);

  await a.page.getByTestId('file-input').setInputFiles([{ name: 'orange.png', mimeType: 'image/png', buffer: TINY_PNG }]);
  await eventually(async () => assert.equal(await a.page.getByTestId('tray-item').getAttribute('data-status'), 'done'));
  await send(a.page, 'An orange square');
  await bubble(a.page, 'An orange square').getByTestId('attachment-image').waitFor();

  const menu = await actions(a.page, 'An orange square');
  await menu.getByRole('menuitem', { name: 'Forward' }).click();
  const dlg = a.page.getByTestId('dialog');
  await dlg.locator(`[data-testid=forward-target][data-conv-id="${group.id}"]`).click();
  await dlg.waitFor({ state: 'detached' });
  await eventually(async () => assert.equal(await a.page.getByTestId('toast').textContent(), 'Message forwarded to Photo wall.'));

  for (const reload of [false, true]) {
    if (reload) await reloadInto(c.page, group.id);
    const copy = bubble(c.page, 'An orange square');
    await copy.waitFor();
    assert.equal(await copy.getByTestId('forwarded').isVisible(), true);
    const img = copy.getByTestId('attachment-image');
    await eventually(async () => {
      const [nw, nh] = await img.evaluate((el) => [el.naturalWidth, el.naturalHeight]);
      assert.ok(nw === 40 && nh === 30, `picture ${nw}×${nh}`);
    });
  }
  await finish(a, c);
});

test('edit own message: everyone sees the new text marked "edited", live and after reload; others get no Edit', async () => {
  const direct = await api(2021, 'POST', '/v1/direct/2022');
  const a = await signIn(2021);
  const b = await signIn(2022);
  await openConversation(a.page, direct.id);
  await openConversation(b.page, direct.id);
  await send(a.page, 'Meet at 5 in the lobby');
  await bubble(b.page, 'Meet at 5 in the lobby').waitFor();

  let menu = await actions(a.page, 'Meet at 5 in the lobby');
  await menu.getByRole('menuitem', { name: 'Edit' }).click();
  const composer = a.page.getByTestId('composer');
  assert.equal(await composer.inputValue(), 'Meet at 5 in the lobby');
  assert.match(await a.page.getByTestId('composer-banner').textContent(), /Editing message/);
  await composer.fill('Meet at 6 in the lobby');
  await composer.press('Enter');
  assert.equal(await composer.inputValue(), '', 'the composer is free again');

  for (const p of [a.page, b.page]) {
    await eventually(async () => assert.deepEqual(await bodies(p), ['Meet at 6 in the lobby']));
    await eventually(async () => assert.equal(await bubble(p, 'Meet at 6 in the lobby').getByTestId('edited').isVisible(), true));
  }
  // Only the sender may edit: B's menu for A's message has no Edit and no delete.
  menu = await actions(b.page, 'Meet at 6 in the lobby');
  assert.deepEqual(await menu.getByRole('menuitem').allTextContents(), ['Reply', 'Forward']);
  await b.page.keyboard.press('Escape');
  await menu.waitFor({ state: 'detached' });

  // Up in the empty composer edits the last own message; Escape cancels.
  await composer.press('ArrowUp');
  assert.equal(await composer.inputValue(), 'Meet at 6 in the lobby');
  await composer.press('Escape');
  assert.equal(await composer.inputValue(), '');
  assert.equal(await a.page.getByTestId('composer-banner').isVisible(), false);

  await reloadInto(b.page, direct.id);
  await eventually(async () => assert.deepEqual(await bodies(b.page), ['Meet at 6 in the lobby']));
  assert.equal(await bubble(b.page, 'Meet at 6 in the lobby').getByTestId('edited').isVisible(), true);
  await finish(a, b);
});

test('delete for everyone: "Message deleted" replaces it everywhere, in replies and the inbox too, live and after reload', async () => {
  const direct = await api(2031, 'POST', '/v1/direct/2032');
  const a = await signIn(2031);
  const b = await signIn(2032);
  await openConversation(a.page, direct.id);
  await send(a.page, 'Wrong chat, sorry');
  const seq = await eventually(async () => {
    const s = Number(await bubble(a.page, 'Wrong chat, sorry').getAttribute('data-seq'));
    assert.ok(s > 0);
    return s;
  });
  await sendVia(2032, direct.id, 'What was that?', { replyTo: seq });
  await eventually(async () => assert.deepEqual(await bodies(a.page), ['Wrong chat, sorry', 'What was that?']));

  const menu = await actions(a.page, 'Wrong chat, sorry');
  await menu.getByRole('menuitem', { name: 'Delete for everyone' }).click();
  await a.page.getByTestId('confirm-delete').click();

  await eventually(async () => assert.deepEqual(await bodies(a.page), ['Message deleted', 'What was that?']));
  const tomb = a.page.locator('[data-testid=message].recalled');
  assert.equal(await tomb.count(), 1);
  assert.equal(await tomb.getByTestId('message-actions').isVisible(), false, 'a deleted message offers no actions');
  assert.equal(await bubble(a.page, 'What was that?').getByTestId('reply-quote').textContent(), 'YouMessage deleted');

  // B was not looking: the inbox shows the reply as the last message, and
  // the conversation shows the tombstone (history, no live event seen on screen).
  await openConversation(b.page, direct.id);
  await eventually(async () => assert.deepEqual(await bodies(b.page), ['Message deleted', 'What was that?']));
  assert.equal(await bubble(b.page, 'What was that?').getByTestId('reply-quote').textContent(), 'User 2031Message deleted');
  await reloadInto(a.page, direct.id);
  await eventually(async () => assert.deepEqual(await bodies(a.page), ['Message deleted', 'What was that?']));

  // Deleting the newest message: the inbox preview says so.
  await recallVia(2032, direct.id, seq + 1);
  await eventually(async () => assert.equal(await row(b.page, direct.id).locator('.conv-preview').textContent(), 'You: Message deleted'));
  await finish(a, b);
});

test('reactions: counts under the bubble, a click toggles your own, live and after reload, and no unread badge', async () => {
  const group = await api(2041, 'POST', '/v1/conversations', { type: 'group', title: 'Lunch', members: [2042, 2043] });
  const cid = group.id;
  const a = await signIn(2041);
  const b = await signIn(2042);
  await openConversation(a.page, cid);
  await openConversation(b.page, cid);
  await send(a.page, 'Pizza on Friday?');
  await bubble(b.page, 'Pizza on Friday?').waitFor();

  // B reacts from the menu; A sees it live.
  const menu = await actions(b.page, 'Pizza on Friday?');
  await menu.getByRole('menuitemcheckbox', { name: 'React with 👍' }).click();
  await eventually(async () => assert.deepEqual(await reactions(b.page, 'Pizza on Friday?'), ['👍 1*']));
  await eventually(async () => assert.deepEqual(await reactions(a.page, 'Pizza on Friday?'), ['👍 1']));

  // A clicks the chip: joins; then a third member adds another emoji.
  await bubble(a.page, 'Pizza on Friday?').getByRole('button', { name: /^👍 1/ }).click();
  await eventually(async () => assert.deepEqual(await reactions(a.page, 'Pizza on Friday?'), ['👍 2*']));
  await reactVia(2043, cid, 1, '🍕');
  await eventually(async () => assert.deepEqual(await reactions(a.page, 'Pizza on Friday?'), ['👍 2*', '🍕 1']));
  await eventually(async () => assert.deepEqual(await reactions(b.page, 'Pizza on Friday?'), ['👍 2*', '🍕 1']));

  // B clicks again: removes only B's.
  await bubble(b.page, 'Pizza on Friday?').getByRole('button', { name: /^👍 2/ }).click();
  await eventually(async () => assert.deepEqual(await reactions(b.page, 'Pizza on Friday?'), ['👍 1', '🍕 1']));
  await eventually(async () => assert.deepEqual(await reactions(a.page, 'Pizza on Friday?'), ['👍 1*', '🍕 1']));

  await reloadInto(a.page, cid);
  await eventually(async () => assert.deepEqual(await reactions(a.page, 'Pizza on Friday?'), ['👍 1*', '🍕 1']));

  // Reactions and edits are not news: with the chat closed, no badge.
  await a.page.evaluate(() => (location.hash = ''));
  await a.page.getByTestId('no-conversation').waitFor();
  await reactVia(2043, cid, 1, '🎉');
  await editVia(2041, cid, 1, 'Pizza on Friday? 12:30');
  await sendVia(2043, cid, 'Yes!');
  await eventually(async () => assert.equal(await unread(a.page, cid), 1), { timeout: 10000 });
  await stays(async () => assert.equal(await unread(a.page, cid), 1, 'only the message counts'), { duration: 500 });
  await finish(a, b);
});

test('changes made while the network was cut arrive after reconnecting, once and in order', async () => {
  const proxy = await startProxy(BASE);
  try {
    const direct = await api(2051, 'POST', '/v1/direct/2052');
    const cid = direct.id;
    const s1 = await sendVia(2052, cid, 'draft one');
    const s2 = await sendVia(2052, cid, 'draft two');
    const s3 = await sendVia(2051, cid, 'my note');
    const a = await signIn(2051, { base: proxy.url });
    await openConversation(a.page, cid);
    await eventually(async () => assert.deepEqual(await bodies(a.page), ['draft one', 'draft two', 'my note']));

    proxy.cut();
    await offline(a.page);
    await editVia(2052, cid, s1, 'final one');
    await recallVia(2052, cid, s2);
    await reactVia(2052, cid, s3, '👀');
    await sendVia(2052, cid, 'done', { replyTo: s1 });
    proxy.restore();
    await online(a.page, 20000);

    await eventually(async () => assert.deepEqual(await bodies(a.page), ['final one', 'Message deleted', 'my note', 'done']));
    await eventually(async () => assert.deepEqual(await reactions(a.page, 'my note'), ['👀 1']));
    assert.equal(await bubble(a.page, 'final one').getByTestId('edited').isVisible(), true);
    assert.equal(await bubble(a.page, 'done').getByTestId('reply-quote').textContent(), 'User 2052final one');
    // Replay and afterSeq may both bring them: nothing doubles.
    await stays(async () => {
      assert.deepEqual(await reactions(a.page, 'my note'), ['👀 1']);
      assert.deepEqual(await bodies(a.page), ['final one', 'Message deleted', 'my note', 'done']);
    });
    await finish(a);
  } finally {
    await proxy.close();
  }
});

test('screenshot: a conversation with a reply, an edited message, a deleted one and reactions, also at phone width', async () => {
  const trip = await api(5, 'POST', '/v1/conversations', { type: 'group', title: 'Weekend trip', members: [6, 7] });
  const cid = trip.id;
  const d6 = await api(6, 'POST', '/v1/direct/5');
  await sendVia(6, d6.id, 'Did you book the cabin?');
  await sendVia(5, d6.id, 'Yes, confirmation is in my mail.');
  const drive = await sendVia(6, cid, 'Who is driving on Saturday?');
  const car = await sendVia(7, cid, 'I can take four people, leaving at 8.');
  await reactVia(5, cid, car, '👍');
  await reactVia(6, cid, car, '👍');
  await reactVia(6, cid, car, '🚗');
  await sendVia(6, cid, 'Great, count me in!', { replyTo: car });
  const snacks = await sendVia(5, cid, 'I will bring snacks');
  await editVia(5, cid, snacks, 'I will bring snacks and the speaker');
  await reactVia(7, cid, snacks, '🎉');
  const oops = await sendVia(7, cid, 'Rain all weekend, trip is off');
  await recallVia(7, cid, oops);
  await sendVia(7, cid, 'Ignore that, wrong group 🙈');
  await reactVia(6, cid, oops + 2, '😂');
  await sendVia(5, cid, 'Then it is settled: 8:00 at the station', { replyTo: drive });
  await api(6, 'POST', `/v1/conversations/${cid}/read`, { seq: 100 });
  await api(7, 'POST', `/v1/conversations/${cid}/read`, { seq: 100 });

  const a = await signIn(5);
  await openConversation(a.page, cid);
  await eventually(async () => assert.equal((await bodies(a.page)).at(-1), 'Then it is settled: 8:00 at the station'));
  await eventually(async () => assert.deepEqual(await reactions(a.page, 'I can take four people, leaving at 8.'), ['👍 2*', '🚗 1']));
  assert.deepEqual(await bodies(a.page), [
    'Who is driving on Saturday?',
    'I can take four people, leaving at 8.',
    'Great, count me in!',
    'I will bring snacks and the speaker',
    'Message deleted',
    'Ignore that, wrong group 🙈',
    'Then it is settled: 8:00 at the station',
  ]);
  // Members load in the background: wait for the direct chat's name.
  await eventually(async () => assert.ok(!(await a.page.getByTestId('conv-title').allTextContents()).includes('Direct message')));
  // Replying, as the composer shows it.
  const menu = await actions(a.page, 'Ignore that, wrong group 🙈');
  await menu.getByRole('menuitem', { name: 'Reply' }).click();
  await a.page.getByTestId('composer').fill('Phew 😅');
  await a.page.mouse.move(0, 0);
  if (SHOTS) await a.page.screenshot({ path: path.join(SHOTS, 'lifecycle.png') });

  // At phone width, the menu stays on screen and the reactions wrap under the bubble.
  const phone = await signIn(5, { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
  await openConversation(phone.page, cid);
  await eventually(async () => assert.deepEqual(await reactions(phone.page, 'I can take four people, leaving at 8.'), ['👍 2*', '🚗 1']));
  const m = bubble(phone.page, 'I can take four people, leaving at 8.');
  await m.getByTestId('message-actions').click();
  const pmenu = phone.page.getByTestId('message-menu');
  const box = await pmenu.boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 390, `menu inside the screen: ${JSON.stringify(box)}`);
  await phone.page.keyboard.press('Escape');
  await pmenu.waitFor({ state: 'detached' });
  const chips = await m.getByTestId('reactions').boundingBox();
  assert.ok(chips.x + chips.width <= 390, 'reactions inside the screen');
  await finish(a, phone);
});
