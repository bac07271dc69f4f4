// Another user's session holds the tab's client id (someone connected
// with web-<uid>-<suffix> first): chatd refuses the page's CONNECT with
// 0x85 client identifier not valid. The page connects with a client id of
// its own, the user still signed in (docs/mobile.md), and what an earlier
// page left unsent under the refused id goes out once. In headless
// Chromium against a real chatd; the other user is an mqtt.js client in
// this process. web/clientid_test.go
// (TestBrowserConnectsWithAClientIDOfItsOwnWhenAnotherUserHoldsItsID)
// starts chatd and runs this file.
//
// Env: CHATD_URL, CHROMIUM_PATH.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import mqtt from 'mqtt';
import { bodies, browserSpec, eventually, finish, online, openConversation, stays } from './helpers.mjs';

const spec = browserSpec();
const { BASE, api, sendAs, token } = spec;

const ME = 9351;
const PEER = 9352;
const SQUATTER = 9353;
const SUFFIX = 'c0ffee00c0de';

/** chatd's count of CONNECTs refused for another user's client id. */
async function clientIDTaken() {
  const text = await (await fetch(`${BASE}/metrics`)).text();
  const m = /^chat_mqtt_connects_total\{outcome="client_id_taken"\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) : 0;
}

test("a tab whose client id another user's session holds connects with one of its own, stays signed in, and sends what was left under the old one once", async () => {
  // Another user connects first with the id the tab will pick, and keeps
  // the connection open.
  const squatter = mqtt.connect(BASE.replace(/^http/, 'ws') + '/mqtt', {
    protocolVersion: 5,
    clientId: `web-${ME}-${SUFFIX}`,
    username: String(SQUATTER),
    password: await token(SQUATTER),
    clean: false,
    properties: { sessionExpiryInterval: 3600 },
    reconnectPeriod: 0,
  });
  const squatterEvents = [];
  squatter.on('disconnect', (p) => squatterEvents.push(`disconnect 0x${p.reasonCode?.toString(16)}`));
  squatter.on('close', () => squatterEvents.push('close'));
  try {
    await new Promise((resolve, reject) => {
      squatter.once('connect', resolve);
      squatter.once('error', reject);
    });

    const conv = await api(PEER, 'POST', `/v1/direct/${ME}`);
    await sendAs(PEER, conv.id, 'hello');
    const refusedBefore = await clientIDTaken();

    // The browser used that suffix before, and an earlier page left a
    // message unsent under it.
    const context = await spec.browser.newContext({ locale: 'en-GB', timezoneId: 'UTC' });
    context.setDefaultTimeout(10000);
    const page = await context.newPage();
    const a = { uid: ME, page, context, dialogs: [], errors: [] };
    page.on('dialog', (d) => {
      a.dialogs.push(d.message());
      d.dismiss().catch(() => {});
    });
    page.on('pageerror', (e) => a.errors.push(`pageerror: ${e.message}`));
    await page.goto(BASE);
    const left = { cid: conv.id, clientMsgId: crypto.randomUUID(), body: 'left by an earlier page', createdAt: new Date(Date.now() - 60000).toISOString() };
    await page.evaluate(
      ({ suffix, key, left }) => {
        localStorage.setItem('chatd.clientSuffixes', JSON.stringify([suffix]));
        localStorage.setItem(key, JSON.stringify([left]));
      },
      { suffix: SUFFIX, key: `chatd.outbox.web-${ME}-${SUFFIX}`, left },
    );
    await page.getByTestId('dev-user').fill(String(ME));
    await page.getByTestId('dev-signin').click();

    // Online with another id, still signed in; the refused suffix is not
    // kept for a later page.
    await online(page, 20000);
    assert.ok((await clientIDTaken()) > refusedBefore, 'chatd refused no CONNECT for a client id taken: the test did not test it');
    assert.equal(await page.getByTestId('signin').count(), 0, 'signed out');
    const suffixes = await page.evaluate(() => JSON.parse(localStorage.getItem('chatd.clientSuffixes')));
    assert.equal(suffixes.length, 1, `suffixes ${suffixes}`);
    assert.notEqual(suffixes[0], SUFFIX);
    assert.match(suffixes[0], /^[0-9a-f]{12}$/);

    // What was left unsent goes out, once, and leaves the outbox.
    const sent = async () => (await api(PEER, 'GET', `/v1/conversations/${conv.id}/messages`)).messages.map((m) => m.body);
    await eventually(async () => assert.deepEqual(await sent(), ['hello', 'left by an earlier page']), { timeout: 20000 });
    await eventually(async () => assert.deepEqual(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('chatd.outbox.'))), []));
    await openConversation(page, conv.id);
    await eventually(async () => assert.deepEqual(await bodies(page), ['hello', 'left by an earlier page']));

    // The new session gets what is sent now, live.
    await sendAs(PEER, conv.id, 'live');
    await eventually(async () => assert.deepEqual(await bodies(page), ['hello', 'left by an earlier page', 'live']), { timeout: 10000 });
    await stays(async () => assert.deepEqual(await sent(), ['hello', 'left by an earlier page', 'live']));
    // The other user's connection was neither taken over nor closed.
    assert.deepEqual(squatterEvents, []);
    assert.ok(squatter.connected);
    await finish(a);
  } finally {
    squatter.end(true);
  }
});
