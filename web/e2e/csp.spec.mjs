// The page's Content-Security-Policy in a real, headless Chromium against
// a real chatd: connect-src names the page's own origin, not the ws: and
// wss: schemes, and the page still opens its MQTT WebSocket (same origin,
// /mqtt) and chats, with no violation reported; a WebSocket to any other
// host, as a script injected into the page would open to carry off what
// it reads, is refused by the browser. Its Permissions-Policy denies it
// the camera, the microphone and the location. web/csp_browser_test.go
// (TestTheWebClientChatsUnderItsPolicyAndReachesNoOtherWebSocketHost)
// starts chatd and runs this file.
//
// Env: CHATD_URL, CHROMIUM_PATH, CHATD_HTTPS_URL (the same chatd's
// https_addr; its test is skipped without it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHROMIUM_ARGS, assertClean, bodies, browserSpec, devSignIn, eventually, finish, launchChromium, openConversation, send } from './helpers.mjs';

const spec = browserSpec();

/**
 * Opens a WebSocket to url in page and answers the connect-src violation
 * Chromium reports for it, or null when none came within a second (the
 * policy let the socket try).
 */
const violation = (page, url) =>
  page.evaluate(
    (url) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), 1000);
        document.addEventListener('securitypolicyviolation', (e) => {
          if (!e.blockedURI.startsWith(new URL(url).origin)) return;
          clearTimeout(timer);
          resolve({ directive: e.effectiveDirective, blocked: e.blockedURI });
        });
        try {
          new WebSocket(url);
        } catch {
          // Chromium may throw a SecurityError besides reporting.
        }
      }),
    url,
  );

/**
 * me and peer, signed in through browser at base, chat both ways in a
 * direct conversation with no violation reported; then a WebSocket from
 * me's page to another host is refused.
 */
async function chatsAndReachesNoOtherHost(browser, base, me, peer) {
  const conv = await spec.api(peer, 'POST', `/v1/direct/${me}`);
  const a = await devSignIn(browser, spec.pages, me, { base });
  const b = await devSignIn(browser, spec.pages, peer, { base });
  await openConversation(a.page, conv.id);
  await openConversation(b.page, conv.id);
  await send(a.page, 'over the socket');
  await eventually(async () => assert.deepEqual(await bodies(b.page), ['over the socket']));
  await send(b.page, 'and back');
  await eventually(async () => assert.deepEqual(await bodies(a.page), ['over the socket', 'and back']));
  // No connect-src (or other) violation while chatting.
  assertClean(a, b);

  // Of the page's own scheme, so that no mixed-content rule refuses them first.
  const own = new URL(base);
  const ws = own.protocol === 'https:' ? 'wss' : 'ws';
  for (const url of [`${ws}://${own.hostname}:1/`, `${ws}://exfiltrate.example/`, `${ws}://localhost:${own.port}/mqtt`]) {
    const v = await violation(a.page, url);
    assert.equal(v?.directive, 'connect-src', `a WebSocket to ${url} must be refused by the page's policy (violation: ${JSON.stringify(v)})`);
  }
  a.errors.length = 0; // the refusals just provoked, reported on the console
  await finish(a, b);
}

test('the page chats over its own ws: WebSocket under its policy, and reaches no other WebSocket host', () =>
  chatsAndReachesNoOtherHost(spec.browser, spec.BASE, 9351, 9352));

test('the page may not use the camera, the microphone or the location, and Chromium reads its Permissions-Policy without complaint', async () => {
  const context = await spec.browser.newContext();
  const page = await context.newPage();
  const complaints = [];
  page.on('console', (m) => /Permissions-Policy|Feature Policy/i.test(m.text()) && complaints.push(m.text()));
  await page.goto(spec.BASE);
  const allowed = await page.evaluate((fs) => fs.filter((f) => document.featurePolicy.allowsFeature(f)),
    ['camera', 'microphone', 'geolocation', 'display-capture', 'payment', 'usb', 'serial', 'hid', 'midi']);
  assert.deepEqual(allowed, [], 'features the page may still use');
  assert.deepEqual(complaints, []);
  await context.close();
});

// The same chatd's https_addr, with a certificate of its own: 'self' of an
// https: page covers its wss: /mqtt.
const HTTPS = process.env.CHATD_HTTPS_URL;
test('the page chats over its own wss: WebSocket under its policy, and reaches no other WebSocket host', { skip: !HTTPS && 'no CHATD_HTTPS_URL' }, async () => {
  const browser = await launchChromium(process.env.CHROMIUM_PATH || '/usr/bin/chromium', [...CHROMIUM_ARGS, '--ignore-certificate-errors']);
  try {
    await chatsAndReachesNoOtherHost(browser, HTTPS, 9353, 9354);
  } finally {
    await browser.close();
  }
});
