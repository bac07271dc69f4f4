// Conversations the page lists but never opened, written to while the page
// was offline, and an inbox of more than a page (200) in which one of them
// gets a message while the page reads the inbox after reconnecting (it
// moves ahead of the pages read: docs/http.md). After the reconnection
// each shows its unread count and, opened, what was written. In headless
// Chromium against a real chatd, behind a proxy whose network is cut.
// The page reads the members of none of them until it is opened (the
// inbox tells what a row shows), so its rows stay still to be clicked.
// web/unopened_test.go (TestBrowserAConversationNeverOpenedCatchesUpAfterTimeOffline)
// starts chatd (no API rate limit: the spec makes 200 groups at once) and
// runs this file.
//
// Env: CHATD_URL, CHROMIUM_PATH.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSpec, bodies, devSignIn, eventually, finish, offline, online, openConversation, row, stays, unread } from './helpers.mjs';
import { startProxy } from './proxy.mjs';

const spec = browserSpec();
const { BASE, api, sendAs } = spec;

const ME = 9361;
const PEER = 9362;

const group = (title) => api(PEER, 'POST', '/v1/conversations', { type: 'group', title, members: [ME] });

test('conversations listed but never opened, written to while the page was offline, show their unread count and messages after it reconnects, one moved while the inbox was paged included', async () => {
  const proxy = await startProxy(BASE);
  try {
    const empty = await group('empty'); // no message yet
    const direct = await api(PEER, 'POST', `/v1/direct/${ME}`); // the other side opened it
    const old = await group('old'); // on the inbox's second page
    await sendAs(PEER, old.id, 'old 1');
    for (let i = 0; i < 200; i++) await group(`newer ${i}`);

    const a = await devSignIn(spec.browser, spec.pages, ME, { base: proxy.url });
    // Conversations read one by one (GET /v1/conversations/{id}).
    const reads = [];
    a.page.on('request', (r) => {
      const m = /\/v1\/conversations\/(\d+)$/.exec(new URL(r.url()).pathname);
      if (m && r.method() === 'GET') reads.push(Number(m[1]));
    });
    for (const c of [empty, direct, old]) await eventually(async () => assert.equal(await row(a.page, c.id).count(), 1));
    await stays(async () => assert.equal(await unread(a.page, old.id), 1));
    assert.deepEqual(reads, [], 'conversations never opened were read one by one after the inbox listed them');

    proxy.cut();
    await offline(a.page);
    for (let i = 1; i <= 3; i++) await sendAs(PEER, empty.id, `empty ${i}`);
    for (let i = 1; i <= 2; i++) await sendAs(PEER, direct.id, `direct ${i}`);
    // The first page of the inbox read after the reconnection is on its
    // way to the page when 'old' gets a message: it moves ahead of it.
    let moved = false;
    await a.context.route('**/v1/inbox?*', async (route) => {
      const res = await route.fetch();
      const page = await res.json();
      if (!moved && page.nextCursor && page.conversations.length === 200) {
        moved = true;
        await sendAs(PEER, old.id, 'old 2');
      }
      await route.fulfill({ response: res, json: page });
    });
    // Dropped from the inbox for a moment, as one the user left, its
    // notifications would go with it.
    await a.page.evaluate((id) => {
      const list = document.querySelector('[data-testid=inbox]');
      window.__dropped = false;
      new MutationObserver(() => {
        if (!list.querySelector(`[data-testid=conv-row][data-conv-id="${id}"]`)) window.__dropped = true;
      }).observe(list, { childList: true });
    }, old.id);
    proxy.restore();
    await online(a.page, 20000);

    const want = new Map([[empty.id, ['empty 1', 'empty 2', 'empty 3']], [direct.id, ['direct 1', 'direct 2']], [old.id, ['old 1', 'old 2']]]);
    for (const [cid, msgs] of want) await eventually(async () => assert.equal(await unread(a.page, cid), msgs.length, `conversation ${cid}`));
    assert.ok(moved, "'old' was not written to while the inbox was read");
    assert.equal(await a.page.evaluate(() => window.__dropped), false, "'old', moved ahead of the inbox's pages read, was dropped from the inbox");
    for (const [cid, msgs] of want) await stays(async () => assert.equal(await unread(a.page, cid), msgs.length, `conversation ${cid}`));
    assert.deepEqual(reads, [], 'conversations never opened were read one by one after the reconnection');
    for (const [cid, msgs] of want) {
      await openConversation(a.page, cid);
      await eventually(async () => assert.deepEqual(await bodies(a.page), msgs));
    }
    assert.deepEqual(reads, [...want.keys()], 'conversations were read other than once each as they were opened');
    await finish(a);
  } finally {
    await proxy.close();
  }
});
