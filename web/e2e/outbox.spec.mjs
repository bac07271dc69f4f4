// A send the server has not answered when the tab goes away (a phone's
// browser discards a background tab, the user reloads while "Sending…")
// is not lost: the page that comes back in the same browser sends it
// again, with the same clientMsgId, so chatd commits it once whether or
// not the first attempt got through; edits and reactions likewise. Signing out deletes what every tab
// of the user kept. In headless Chromium against a real
// chatd, behind a proxy whose network the spec cuts. web/outbox_test.go
// (TestBrowserASendUnansweredWhenTheTabGoesAwayIsSentWhenItComesBack)
// starts chatd and runs this file.
//
// Env: CHATD_URL, CHROMIUM_PATH.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actions, browserSpec, bodies, devSignIn, eventually, finish, offline, online, openConversation, openDirect, stays } from './helpers.mjs';
import { startProxy } from './proxy.mjs';

const spec = browserSpec();
const { BASE, pages, api } = spec;


const ME = 9331;
const PEER = 9332;

/** [seq, status] of every message on screen. */
const seqs = (page) =>
  page.getByTestId('message').evaluateAll((els) => els.map((e) => [e.dataset.seq ? Number(e.dataset.seq) : null, e.dataset.status]));

test('a send still unanswered when the tab goes away is sent once the page is back, once', async () => {
  const proxy = await startProxy(BASE);
  try {
    const { conv, a } = await openDirect(spec, ME, PEER, [[PEER, 'hello']], { base: proxy.url });

    // On the train: the network is gone, the user writes, and the browser
    // discards the tab while it still says "Sending…".
    proxy.cut();
    await offline(a.page);
    await a.page.getByTestId('composer').fill('written in the tunnel');
    await a.page.getByTestId('composer').press('Enter');
    await eventually(async () => assert.deepEqual((await seqs(a.page)).at(-1), [null, 'sending']));
    await a.page.close();

    // Back in coverage, the user opens chatd again in the same browser.
    proxy.restore();
    const page = await reopen(a, proxy.url);
    const sent = async () => (await api(PEER, 'GET', `/v1/conversations/${conv.id}/messages`)).messages.map((m) => m.body);
    await eventually(async () => assert.deepEqual(await sent(), ['hello', 'written in the tunnel']), { timeout: 20000 });
    await openConversation(page, conv.id);
    await eventually(async () => assert.deepEqual(await seqs(page), [[1, 'sent'], [2, 'sent']]));
    assert.deepEqual(await bodies(page), ['hello', 'written in the tunnel']);

    // Once: another reload sends nothing more.
    await page.reload();
    await online(page, 20000);
    await openConversation(page, conv.id);
    await eventually(async () => assert.deepEqual(await seqs(page), [[1, 'sent'], [2, 'sent']]));
    await stays(async () => {
      assert.deepEqual(await sent(), ['hello', 'written in the tunnel']);
      assert.deepEqual(await seqs(page), [[1, 'sent'], [2, 'sent']]);
    });
    await finish(a);
  } finally {
    await proxy.close();
  }
});

test('an edit and a reaction made offline when the tab goes away are made once the page is back, once', async () => {
  const proxy = await startProxy(BASE);
  try {
    const me = ME + 20;
    const peer = PEER + 20;
    const { conv, a } = await openDirect(spec, me, peer, [[peer, 'lunch?'], [me, 'at 12']], { base: proxy.url });

    proxy.cut();
    await offline(a.page);
    let menu = await actions(a.page, 'lunch?');
    await menu.getByRole('menuitemcheckbox', { name: 'React with 👍' }).click();
    menu = await actions(a.page, 'at 12');
    await menu.getByRole('menuitem', { name: 'Edit' }).click();
    await a.page.getByTestId('composer').fill('at 1');
    await a.page.getByTestId('composer').press('Enter');
    const kept = () => a.page.evaluate(() => Object.entries(localStorage).filter(([k]) => k.startsWith('chatd.outbox.')).flatMap(([, v]) => JSON.parse(v).map((e) => e.op)));
    await eventually(async () => assert.deepEqual(await kept(), ['react', 'edit']));
    await a.page.close();

    proxy.restore();
    const page = await reopen(a, proxy.url);
    const history = async () => (await api(peer, 'GET', `/v1/conversations/${conv.id}/messages`)).messages;
    const shown = async () => (await history()).filter((m) => !m.kind || m.kind === 'message').map((m) => [m.body, (m.reactions || []).map((r) => `${r.emoji} ${r.count}`)]);
    await eventually(async () => assert.deepEqual(await shown(), [['lunch?', ['👍 1']], ['at 1', []]]), { timeout: 20000 });
    await eventually(async () => assert.deepEqual(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('chatd.outbox.'))), []));

    // Once: another reload makes no entry more.
    const entries = (await history()).length;
    await page.reload();
    await online(page, 20000);
    await stays(async () => assert.equal((await history()).length, entries));
    await finish(a);
  } finally {
    await proxy.close();
  }
});

test('signing out deletes the unsent messages of every tab of the user from the browser', async () => {
  const proxy = await startProxy(BASE);
  try {
    const conv = await api(PEER + 10, 'POST', `/v1/direct/${ME + 10}`);
    const a = await devSignIn(spec.browser, pages, ME + 10, { base: proxy.url });
    // A second tab of the same browser, with the conversation open.
    const other = await a.context.newPage();
    other.on('pageerror', (e) => a.errors.push(`pageerror: ${e.message}`));
    await other.goto(proxy.url);
    await online(other, 20000);
    await openConversation(other, conv.id);
    // Offline, the second tab holds a message it could not send.
    proxy.cut();
    await offline(other);
    await other.getByTestId('composer').fill('not for the next person at this browser');
    await other.getByTestId('composer').press('Enter');
    await eventually(async () => assert.deepEqual((await seqs(other)).at(-1), [null, 'sending']));
    // Read in the first tab: another tab's localStorage write reaches it
    // a moment later (Chromium hands it between renderers).
    const kept = () => a.page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('chatd.outbox.')));
    await eventually(async () => assert.equal((await kept()).length, 1, 'the unsent message is kept for the tab'));

    // The user signs out in the first tab: both tabs show the sign-in.
    await a.page.getByRole('button', { name: 'Sign out' }).click();
    await a.page.getByTestId('signin').waitFor();
    await other.getByTestId('signin').waitFor();
    await eventually(async () => assert.deepEqual(await kept(), [], 'the text of an unsent message stayed in the browser after signing out'), { timeout: 5000 });
    await finish(a);
  } finally {
    await proxy.close();
  }
});

/** The user opens chatd again in a new tab of the same browser, the last one gone. */
async function reopen(a, url) {
  const page = await a.context.newPage();
  a.page = page;
  page.on('pageerror', (e) => a.errors.push(`pageerror: ${e.message}`));
  await page.goto(url);
  await online(page, 20000);
  return page;
}
