// End-to-end tests of the web client and a message over chatd's body limit
// (max_body_bytes, 16 KiB by default, told in the CONNACK's user property
// maxBodyBytes): the composer says so before sending, and a message
// refused too_large anyway (an older server, a limit lowered) says why on
// the page, with no Retry and its text back to the composer to shorten.
// Run by TestBrowserE2E; by hand:
//
//   CHATD_URL=http://127.0.0.1:8080 node web/e2e/toolong.spec.mjs
//
// Env as chat.spec.mjs. Users are 9801 and up, their own.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bodies, browserSpec, eventually, finish, online, openDirect, send } from './helpers.mjs';

const spec = browserSpec();
const LIMIT = 16384; // chatd's default max_body_bytes

test('a text over the body limit is not sent: the composer says by how many characters, and it goes once shortened', async () => {
  const { conv, a } = await openDirect(spec, 9801, 9802, []);
  // "é" is two bytes of UTF-8: one "é" too many is two bytes over.
  const long = 'é'.repeat(LIMIT / 2 + 1);
  await send(a.page, long);
  const hint = a.page.getByTestId('composer-too-long');
  await hint.waitFor();
  assert.match(await hint.textContent(), /shorten it by 1 character\b/);
  assert.equal(await a.page.getByTestId('composer').inputValue(), long, 'the text left the composer');
  assert.deepEqual(await bodies(a.page), [], 'the text over the limit was sent');
  await a.page.getByTestId('composer').press('Backspace');
  await hint.waitFor({ state: 'hidden' });
  await a.page.getByTestId('composer').press('Enter');
  await eventually(async () => assert.deepEqual((await spec.api(9801, 'GET', `/v1/conversations/${conv.id}/messages`)).messages.map((m) => m.body.length), [LIMIT / 2]));
  await finish(a);
});

test('a message refused too_large says why on the page, offers no Retry, and Edit puts its text back in the composer', async () => {
  const { a } = await openDirect(spec, 9803, 9804, []);
  // An older server, or a limit lowered: the page is told a limit chatd
  // does not keep (the CONNACK's "16384" made "99999", same length).
  await a.page.routeWebSocket(/\/mqtt$/, (ws) => {
    const server = ws.connectToServer();
    ws.onMessage((m) => server.send(m));
    server.onMessage((m) => {
      if (typeof m !== 'string') {
        const i = m.indexOf(`maxBodyBytes\u0000\u0005${LIMIT}`);
        if (i >= 0) m.write('99999', i + 'maxBodyBytes'.length + 2);
      }
      ws.send(m);
    });
  });
  await a.page.reload();
  await online(a.page);
  await a.page.getByTestId('conv-row').first().click();
  const long = 'x'.repeat(LIMIT + 1);
  await send(a.page, long);
  const m = a.page.locator('[data-testid=message][data-status=failed]');
  const reason = m.getByTestId('failed-reason');
  await reason.waitFor();
  assert.match(await reason.textContent(), /too long/i);
  assert.ok(await m.getByTestId('retry').isHidden(), 'Retry is offered for a message that can never be accepted');
  await m.getByTestId('edit-failed').click();
  assert.equal(await a.page.getByTestId('composer').inputValue(), long);
  await eventually(async () => assert.deepEqual(await bodies(a.page), [], 'the refused message is still on the page'));
  await finish(a);
});
