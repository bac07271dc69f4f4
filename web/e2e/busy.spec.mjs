// End-to-end tests of the web client against a busy chatd: a request
// answered 429 or 503 is sent again after the Retry-After, and the place
// the user looks says so meanwhile (src/api.js Api.exchange). The refusal
// is the browser's (Playwright answers that one request), the rest is the
// real chatd. Run by TestBrowserE2E; by hand:
//
//   CHATD_URL=http://127.0.0.1:8080 node web/e2e/busy.spec.mjs
//
// Env as chat.spec.mjs. Users are 7701 and up, their own.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSpec, devSignIn, eventually, finish, openConversation, recordTexts, row, texts } from './helpers.mjs';

const spec = browserSpec();
const { BASE, pages, api } = spec;

const signIn = (uid) => devSignIn(spec.browser, pages, uid, { base: BASE });

/** Has page's first request matching url answered as chatd answers a busy one (status, Retry-After s), the others go through. */
async function refuseOnce(page, url, status, s) {
  let refused = false;
  await page.route(url, (route) => {
    if (refused) return route.continue();
    refused = true;
    const error = status === 429 ? { code: 'rate_limited', message: 'rate limited: at most 50 requests per second (burst 100); retry in 1.2s', retryAfter: s } : { code: 'unavailable', message: 'the database is unavailable' };
    return route.fulfill({ status, headers: { 'Retry-After': String(s), 'Content-Type': 'application/json' }, body: JSON.stringify({ error }) });
  });
}

test('an inbox load answered 429 says chatd is busy in the inbox, then loads on its own', async () => {
  const a = await signIn(7701);
  await refuseOnce(a.page, '**/v1/inbox?*', 429, 2);
  // The wait is on screen for the two seconds: recorded as it changes, not
  // polled, which a slow round trip to the browser could miss.
  await recordTexts(a.page, 'inbox-wait');
  // A chat someone opens with us: the page loads the inbox again.
  const d = await api(7702, 'POST', '/v1/direct/7701');
  const wait = a.page.getByTestId('inbox-wait');
  await eventually(async () => assert.ok((await texts(a.page, 'inbox-wait')).some((t) => /^chatd is busy, retrying in [12] s$/.test(t)), JSON.stringify(await texts(a.page, 'inbox-wait'))));
  await row(a.page, d.id).waitFor();
  assert.ok(await wait.isHidden(), 'the wait is still shown');
  assert.ok(await a.page.getByTestId('toast').isHidden(), `an error was shown: ${await a.page.getByTestId('toast').textContent()}`);
  await finish(a);
});

test("a group's members answered 503 say chatd is busy in the panel, then show", async () => {
  const g = await api(7703, 'POST', '/v1/conversations', { type: 'group', title: 'Busy', members: [7704] });
  const a = await signIn(7703);
  await openConversation(a.page, g.id);
  await refuseOnce(a.page, `**/v1/conversations/${g.id}/members?*`, 503, 1);
  // On screen for one second and up to a quarter more (the retry's
  // jitter, src/retry.js): "2 s" first when the wait is over a second, then
  // "1 s", which a busy browser may never paint before the retry clears it.
  // Recorded as it changes, not polled.
  await recordTexts(a.page, 'panel-error');
  await a.page.getByTestId('info').click();
  await eventually(async () => assert.ok((await texts(a.page, 'panel-error')).some((t) => /^chatd is busy, retrying in [12] s$/.test(t)), JSON.stringify(await texts(a.page, 'panel-error'))));
  await eventually(async () => assert.equal(await a.page.getByTestId('member').count(), 2));
  assert.equal(await a.page.getByTestId('panel-error').textContent(), '', 'the wait is still shown');
  await finish(a);
});

test("an upload whose PUT is answered 429 (16 of the user's PUTs running) says chatd is busy in the tray, then uploads on its own", async () => {
  const d = await api(7705, 'POST', '/v1/direct/7706');
  const a = await signIn(7705);
  await openConversation(a.page, d.id);
  // The ticket is /v1/uploads: the first request of this pattern is the PUT.
  await refuseOnce(a.page, '**/v1/uploads/*', 429, 2);
  await recordTexts(a.page, 'tray-state');
  await a.page.getByTestId('file-input').setInputFiles([{ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('the minutes') }]);
  await eventually(async () => assert.ok((await texts(a.page, 'tray-state')).some((t) => /^chatd is busy, retrying in [123] s$/.test(t)), JSON.stringify(await texts(a.page, 'tray-state'))));
  const item = a.page.getByTestId('tray-item');
  await eventually(async () => assert.equal(await item.getAttribute('data-status'), 'done', JSON.stringify(await texts(a.page, 'tray-state'))));
  assert.ok(!(await texts(a.page, 'tray-state')).some((t) => /too many|rate limited/.test(t)), `the refusal was shown as a failure: ${JSON.stringify(await texts(a.page, 'tray-state'))}`);
  await finish(a);
});
