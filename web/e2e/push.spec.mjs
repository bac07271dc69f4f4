// The web client's notifications, end to end in headless Chromium against
// a real chatd: the permission asked on a click; the service worker's
// subscription registered with POST /v1/devices; while the page is hidden
// (still connected and acknowledging, so chatd pushes nothing) the page
// shows the notification itself; once it is closed, chatd's encrypted push
// (RFC 8291) reaches a loopback push service that decrypts it, the service
// worker shows it, and a click opens the conversation; closed again, a
// pushed message that is recalled is followed by a silent remove push
// that takes its notification away. web/browser_test.go
// (TestBrowserPush) starts chatd and the loopback push service and runs
// this file.
//
// Env: CHATD_URL, CHROMIUM_PATH, and from the loopback push service
// PUSH_ENDPOINT (the subscription's endpoint), PUSH_P256DH, PUSH_AUTH (its
// keys) and PUSH_LOG (GET: the decrypted payloads it accepted, JSON).
//
// Headless Chromium has no vendor push service to subscribe with, so the
// page's PushManager answers with that loopback subscription instead; the
// rest (permission, service worker, chatd, encryption, notification) is
// the real thing.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { devAPI, eventually, launchChromium, stays } from './helpers.mjs';

const BASE = process.env.CHATD_URL;
const SUB = { endpoint: process.env.PUSH_ENDPOINT, p256dh: process.env.PUSH_P256DH, auth: process.env.PUSH_AUTH };
const LOG = process.env.PUSH_LOG;
if (!BASE || !SUB.endpoint || !LOG) throw new Error('set CHATD_URL, PUSH_ENDPOINT, PUSH_P256DH, PUSH_AUTH and PUSH_LOG');

let browser;
before(async () => {
  browser = await launchChromium(process.env.CHROMIUM_PATH || '/usr/bin/chromium', [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--disable-background-networking',
    '--no-first-run',
  ]);
});
after(async () => {
  await browser?.close();
});

const { api, sendAs } = devAPI(BASE);

// How long a wait for a notification to leave the screen may take: well
// under the ~25 s after which headless Chromium takes a notification off
// the screen by itself, so that such a wait cannot pass for that reason.
const SHORT = 10000;

test('notifications: asked on a click, subscribed, shown by the page while hidden, pushed encrypted while closed, opening the conversation', async () => {
  const me = 61;
  const peer = 60;
  const context = await fakePushContext();
  await recordNotifying(context);
  const errors = [];
  let page = await signIn(context, me, errors);

  // Nothing is asked or registered before the click.
  assert.deepEqual((await api(me, 'GET', '/v1/devices')).devices, []);
  const bell = page.getByTestId('enable-notifications');
  await bell.waitFor();
  await bell.click();
  await page.locator('[data-testid=enable-notifications][data-state=on]').waitFor();
  const { devices } = await api(me, 'GET', '/v1/devices');
  assert.equal(devices.length, 1);
  assert.equal(devices[0].platform, 'webpush');
  assert.equal(devices[0].endpoint, SUB.endpoint);
  const opts = await page.evaluate(() => window.__pushOptions);
  const { publicKey } = await api(me, 'GET', '/v1/push/vapid');
  assert.equal(opts.userVisibleOnly, true);
  assert.equal(opts.key.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''), publicKey, 'subscribed with the server VAPID key');

  // Hidden, the page stays connected and acknowledges, so chatd sends no
  // push: the page shows the notification itself.
  const conv = await hiddenWithConversation(page, me, peer);
  await sendAs(peer, conv.id, 'while hidden');
  const sw = context.serviceWorkers()[0] || (await context.waitForEvent('serviceworker'));
  const local = await eventually(async () => {
    const ns = await onScreen(page);
    assert.equal(ns.length, 1, 'the hidden page shows a notification');
    return ns[0];
  });
  assert.equal(local.body, 'while hidden');
  assert.equal(local.tag, `conv-${conv.id}`);
  await sw.evaluate(() => self.registration.getNotifications().then((l) => l.forEach((x) => x.close())));

  // The page closes (its MQTT session ends); a message arrives.
  await closed(page, me, peer);
  await sendAs(peer, conv.id, 'hello from 60');
  const pushed = await eventually(async () => {
    const got = await (await fetch(LOG)).json();
    assert.equal(got.length, 1, 'one push at the loopback push service');
    return got[0];
  });
  const n = JSON.parse(pushed);
  assert.equal(n.conversationId, conv.id);
  assert.equal(n.userId, me, 'the push names the user it is for');
  assert.equal(n.seq, 2, 'the message the hidden page acknowledged is not pushed');
  assert.equal(n.senderId, peer);
  assert.equal(n.count, 1);
  assert.equal(n.badge, 2);
  assert.equal(n.title, 'New message');
  assert.equal(n.body, undefined, 'no preview by default');

  // The browser's push service would now wake the service worker with
  // that payload: DevTools delivers it the same way.
  const { push, closedPageGone } = await workerPushes(context, sw);
  await closedPageGone();
  const deliver = () => push(pushed);
  await deliver();
  let tries = 0;
  const shown = await eventually(async () => {
    const ns = await workerOnScreen(sw);
    if (ns.length === 0 && ++tries % 10 === 0) {
      // On a loaded machine the worker can still count the closed page
      // among its visible clients when the push arrives, and leave the
      // push to it: deliver it again (the same tag replaces, never adds).
      await closedPageGone();
      await deliver();
    }
    assert.equal(ns.length, 1, 'one notification');
    return ns[0];
  });
  assert.equal(shown.title, 'New message');
  assert.equal(shown.tag, `conv-${conv.id}`);
  assert.equal(shown.data.url, `/#/c/${conv.id}`);

  // A click opens the conversation in the page.
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(BASE);
  await page.locator('[data-testid=connection][data-state=online]').waitFor();
  await sw.evaluate(async () => {
    const [x] = await self.registration.getNotifications();
    self.dispatchEvent(new NotificationEvent('notificationclick', { notification: x }));
  });
  await page.locator(`[data-testid=conversation][data-conv-id="${conv.id}"]`).waitFor();
  await page.getByTestId('message-body').filter({ hasText: 'hello from 60' }).waitFor();
  assert.equal((await workerOnScreen(sw)).length, 0, 'the clicked notification is closed');

  // Closed again, a message is pushed and shown, then recalled: chatd
  // pushes a silent remove and the service worker takes the notification
  // away.
  await closed(page, me, peer);
  const sent = await sendAs(peer, conv.id, 'sent by mistake');
  const second = await eventually(async () => {
    const got = await (await fetch(LOG)).json();
    assert.equal(got.length, 2, 'the second push at the loopback push service');
    return got[1];
  });
  await closedPageGone();
  await push(second);
  await eventually(async () => {
    assert.equal((await workerOnScreen(sw)).length, 1, 'the second notification is shown');
  });
  await api(peer, 'DELETE', `/v1/conversations/${conv.id}/messages/${sent.seq}`);
  const removal = await eventually(async () => {
    const got = await (await fetch(LOG)).json();
    assert.equal(got.length, 3, 'the remove at the loopback push service');
    return got[2];
  });
  const rm = JSON.parse(removal);
  assert.equal(rm.type, 'remove');
  assert.equal(rm.conversationId, conv.id);
  assert.equal(rm.seq, sent.seq);
  assert.equal(rm.title, undefined, 'a remove is silent');
  await push(removal);
  await eventually(async () => {
    assert.equal((await workerOnScreen(sw)).length, 0, 'the recalled message\'s notification is taken away');
  }, { timeout: SHORT });
  assert.deepEqual(errors, []);
  await context.close();
});

test('signing out while the page is showing a notification takes that one off the screen too', async () => {
  const me = 74;
  const peer = 73;
  const { context, page, shown, why, errors } = await withNotifications(me);
  const conv = await hiddenWithConversation(page, me, peer);
  // The page's next notification is held half-shown while the user signs
  // out: signing out must wait for it, then take it away with the rest.
  await page.evaluate(() => {
    window.__hold = new Promise((r) => (window.__release = r));
  });
  await sendAs(peer, conv.id, 'arrives as you leave');
  await eventually(async () => assert.equal(await page.evaluate(() => window.__showing), 1, 'the page is showing the message'), { explain: why });
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByTestId('signin').waitFor();
  await page.evaluate(() => window.__release());
  await eventually(async () => assert.deepEqual(await shown(), [], 'the notification shown as the user signed out is left on screen'), {
    timeout: SHORT,
    explain: why,
  });
  assert.deepEqual(errors, []);
  await context.close();
});

test('a remove push that comes while the service worker is still showing its message takes the notification away', async () => {
  const me = 76;
  const peer = 75;
  const { context, page, sw, errors } = await withNotifications(me);
  const conv = await api(peer, 'POST', `/v1/direct/${me}`);
  await page.close();
  const { push, closedPageGone } = await workerPushes(context, sw);
  await closedPageGone();
  // The message push is held half-shown when its remove push arrives.
  await sw.evaluate(() => {
    self.__hold = new Promise((r) => (self.__release = r));
  });
  const delivered = [push(JSON.stringify({ type: 'message', userId: me, conversationId: conv.id, seq: 1, senderId: peer, count: 1, badge: 1, title: 'New message' }))];
  await eventually(async () => assert.equal(await sw.evaluate(() => self.__showing), 1, 'the worker is showing the pushed message'));
  delivered.push(push(JSON.stringify({ type: 'remove', conversationId: conv.id, seq: 1, badge: 0 })));
  await sw.evaluate(() => self.__release());
  await Promise.all(delivered);
  await eventually(async () => assert.deepEqual(await workerOnScreen(sw), [], 'the recalled message\'s notification is left on screen'), { timeout: SHORT });
  assert.deepEqual(errors, []);
  await context.close();
});

test('an update push of an older edit that comes after the newer one (push services keep no order between them) leaves the newer text on screen', async () => {
  const me = 83;
  const peer = 82;
  const { context, page, sw, errors } = await withNotifications(me);
  const conv = await api(peer, 'POST', `/v1/direct/${me}`);
  await page.close();
  const { push, closedPageGone } = await workerPushes(context, sw);
  await closedPageGone();
  const texts = async () => (await workerOnScreen(sw)).map((x) => x.body);
  await push(JSON.stringify({ type: 'message', userId: me, conversationId: conv.id, seq: 1, senderId: peer, count: 1, badge: 1, title: 'New message', body: 'meet at 5, pin 4711' }));
  await eventually(async () => assert.deepEqual(await texts(), ['meet at 5, pin 4711']));
  // The message was edited twice; the second edit's update comes first.
  await push(JSON.stringify({ type: 'update', userId: me, conversationId: conv.id, seq: 1, editSeq: 3, badge: 1, body: 'meet at 6' }));
  await eventually(async () => assert.deepEqual(await texts(), ['meet at 6']));
  await push(JSON.stringify({ type: 'update', userId: me, conversationId: conv.id, seq: 1, editSeq: 2, badge: 1, body: 'meet at 5' }));
  await stays(async () => assert.deepEqual(await texts(), ['meet at 6'], "the first edit's update, come last, put its older text back"), { duration: 1000 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('signing out while the service worker is showing a pushed notification takes that one off the screen too', async () => {
  const me = 78;
  const peer = 77;
  const { context, page, sw, errors } = await withNotifications(me);
  const conv = await api(peer, 'POST', `/v1/direct/${me}`);
  const { push } = await workerPushes(context, sw);
  // The page loses focus (Playwright has each page act focused): the
  // worker shows the push itself instead of leaving it to the page.
  await (await context.newCDPSession(page)).send('Emulation.setFocusEmulationEnabled', { enabled: false });
  await eventually(async () =>
    assert.equal(
      await sw.evaluate(() => self.clients.matchAll({ type: 'window' }).then((l) => l.filter((c) => c.focused).length)),
      0,
      'the page is no longer focused',
    ),
  );
  // The worker's show of a push is held half-way while the user signs out
  // in the page: the page's sign-out must wait for it (the page and the
  // worker take turns), then take it away with the rest.
  await sw.evaluate(() => {
    self.__hold = new Promise((r) => (self.__release = r));
  });
  const delivered = push(JSON.stringify({ type: 'message', userId: me, conversationId: conv.id, seq: 1, senderId: peer, count: 1, badge: 1, title: 'New message' }));
  await eventually(async () => assert.equal(await sw.evaluate(() => self.__showing), 1, 'the worker is showing the pushed message'));
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByTestId('signin').waitFor();
  await sw.evaluate(() => self.__release());
  await delivered;
  await eventually(async () => assert.deepEqual(await workerOnScreen(sw), [], 'the notification the worker showed as the user signed out is left on screen'), {
    timeout: SHORT,
  });
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * A fresh browser of user me, signed in, notifications on: its page, its
 * service worker, shown() (the notifications on screen) and the page's
 * errors.
 */
async function withNotifications(me) {
  const context = await fakePushContext();
  const frames = await recordNotifying(context);
  const errors = [];
  const page = await signIn(context, me, errors);
  await page.getByTestId('enable-notifications').click();
  await page.locator('[data-testid=enable-notifications][data-state=on]').waitFor();
  const sw = context.serviceWorkers()[0] || (await context.waitForEvent('serviceworker'));
  const shown = () => onScreen(page).then((l) => l.map((x) => ({ body: x.body, tag: x.tag, seq: x.data?.seq })));
  // For a wait on shown() that times out: whether the message.new reached
  // the page over MQTT, and what the page did with it.
  const why = async () => {
    const p = await page
      .evaluate(() => ({
        visibility: document.visibilityState,
        permission: Notification.permission,
        device: Object.keys(localStorage).filter((k) => k.startsWith('chatd.pushDevice.')),
        shows: window.__shows ?? [],
      }))
      .catch((e) => ({ error: e.message }));
    return `page: ${JSON.stringify(p)}; message.new frames the pages received: ${JSON.stringify(frames)}`;
  };
  return { context, page, sw, shown, why, errors };
}

/**
 * Records, for a failure's explanation, the MQTT frames carrying a
 * message.new that the context's pages receive (conversation, seq, ms
 * since the start) and each showNotification call of a page (its seq, how
 * long it took, its error) in window.__shows; counts the calls under way
 * in window.__showing (onScreen waits for none), and holds each call
 * while window.__hold is an unsettled promise (a test's way to act while
 * the page is showing a notification).
 */
async function recordNotifying(context) {
  const start = Date.now();
  const frames = [];
  context.on('page', (p) =>
    p.on('websocket', (ws) =>
      ws.on('framereceived', ({ payload }) => {
        const text = typeof payload === 'string' ? payload : payload.toString('latin1');
        if (!text.includes('"message.new"')) return;
        frames.push({ conv: text.match(/"conversationId":(\d+)/)?.[1], seq: text.match(/"seq":(\d+)/)?.[1], at: Date.now() - start });
      }),
    ),
  );
  await context.addInitScript(() => {
    if (typeof window === 'undefined' || !self.ServiceWorkerRegistration) return;
    const show = ServiceWorkerRegistration.prototype.showNotification;
    ServiceWorkerRegistration.prototype.showNotification = async function (title, opts) {
      const rec = { seq: opts?.data?.seq ?? null, at: Date.now() };
      (window.__shows ??= []).push(rec);
      window.__showing = (window.__showing ?? 0) + 1;
      try {
        await window.__hold;
        const r = await show.call(this, title, opts);
        rec.ms = Date.now() - rec.at;
        return r;
      } catch (e) {
        rec.error = String(e);
        throw e;
      } finally {
        window.__showing--;
      }
    };
  });
  return frames;
}

test('a message recalled while the page is hidden takes away the notification the page showed for it', async () => {
  const me = 63;
  const peer = 62;
  const { context, page, shown, why, errors } = await withNotifications(me);
  const conv = await hiddenWithConversation(page, me, peer);
  const sent = await sendAs(peer, conv.id, 'my bank password is hunter2');
  await eventually(async () => assert.deepEqual(await shown(), [{ body: 'my bank password is hunter2', tag: `conv-${conv.id}`, seq: sent.seq }]), { explain: why });

  // chatd pushed nothing (the page acknowledged), so no remove push will
  // come: the page itself must take the recalled text off the screen.
  await api(peer, 'DELETE', `/v1/conversations/${conv.id}/messages/${sent.seq}`);
  await eventually(async () => assert.deepEqual(await shown(), [], 'the recalled message\'s text is no longer on screen'), { timeout: SHORT, explain: why });

  // A recall of an older message leaves the notification of a newer one.
  const first = await sendAs(peer, conv.id, 'first');
  const second = await sendAs(peer, conv.id, 'second');
  await eventually(async () => assert.deepEqual(await shown(), [{ body: 'second', tag: `conv-${conv.id}`, seq: second.seq }]), { explain: why });
  await page.locator(`[data-testid=conv-row][data-conv-id="${conv.id}"]`).click();
  await page.getByTestId('message-body').filter({ hasText: 'second' }).waitFor();
  await api(peer, 'DELETE', `/v1/conversations/${conv.id}/messages/${first.seq}`);
  await page.getByTestId('message-body').filter({ hasText: 'Message deleted' }).nth(1).waitFor();
  await stays(async () => assert.deepEqual(await shown(), [{ body: 'second', tag: `conv-${conv.id}`, seq: second.seq }]), { duration: 300 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('a message edited while the page is hidden shows its new text in the notification the page showed for it', async () => {
  const me = 67;
  const peer = 66;
  const { context, page, shown, why, errors } = await withNotifications(me);
  const conv = await hiddenWithConversation(page, me, peer);
  const sent = await sendAs(peer, conv.id, 'call me on 555-0100');
  await eventually(async () => assert.deepEqual(await shown(), [{ body: 'call me on 555-0100', tag: `conv-${conv.id}`, seq: sent.seq }]), { explain: why });

  // The sender took the number out: it must not stay on the screen.
  await api(peer, 'PATCH', `/v1/conversations/${conv.id}/messages/${sent.seq}`, { clientMsgId: crypto.randomUUID(), body: 'call me' });
  await eventually(async () => assert.deepEqual(await shown(), [{ body: 'call me', tag: `conv-${conv.id}`, seq: sent.seq }]), { explain: why });

  // An edit of an older message leaves the notification of a newer one.
  const first = await sendAs(peer, conv.id, 'first');
  const second = await sendAs(peer, conv.id, 'second');
  await eventually(async () => assert.deepEqual(await shown(), [{ body: 'second', tag: `conv-${conv.id}`, seq: second.seq }]), { explain: why });
  await page.locator(`[data-testid=conv-row][data-conv-id="${conv.id}"]`).click();
  await page.getByTestId('message-body').filter({ hasText: 'second' }).waitFor();
  await api(peer, 'PATCH', `/v1/conversations/${conv.id}/messages/${first.seq}`, { clientMsgId: crypto.randomUUID(), body: 'first, fixed' });
  await page.getByTestId('message-body').filter({ hasText: 'first, fixed' }).waitFor();
  await stays(async () => assert.deepEqual(await shown(), [{ body: 'second', tag: `conv-${conv.id}`, seq: second.seq }]), { duration: 500 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('a group the user is removed from while the page is hidden takes away the notification the page showed for it', async () => {
  const me = 80;
  const owner = 81;
  const { context, page, shown, why, errors } = await withNotifications(me);
  const group = await hiddenWithConversation(page, me, owner, () => api(owner, 'POST', '/v1/conversations', { type: 'group', title: 'Plans', members: [me] }));
  const sent = await sendAs(owner, group.id, 'the surprise party is on Friday');
  await eventually(async () => assert.deepEqual(await shown(), [{ body: 'the surprise party is on Friday', tag: `conv-${group.id}`, seq: sent.seq }]), { explain: why });

  // No longer a member: what the group says is not the user's to read.
  await api(owner, 'DELETE', `/v1/conversations/${group.id}/members/${me}`);
  await eventually(async () => assert.deepEqual(await shown(), [], 'the notification of a group the user was removed from is still on screen'), { timeout: SHORT, explain: why });
  assert.deepEqual(errors, []);
  await context.close();
});

// Signing out, or being signed out by a refused token, takes the
// notifications the page showed off the screen: the next person at this
// browser must not read them, nor get the user's next pushes, so the
// browser's subscription is dropped too (chatd may not hear the device's
// delete: a sign-out while offline).
for (const { name, me, peer, signOut } of [
  {
    name: 'signing out takes the notifications the page showed off the screen',
    me: 65,
    peer: 64,
    signOut: (page) => page.getByRole('button', { name: 'Sign out' }).click(),
  },
  {
    name: 'a sign-out forced by a refused token drops the browser\'s push subscription and the notifications, as signing out does',
    me: 72,
    peer: 71,
    // "Sign out everywhere" on another device: chatd ends this page's
    // connection and refuses its token from then on (as once it expires).
    signOut: (_page, me) => api(me, 'POST', '/v1/me/tokens/revoke'),
  },
]) {
  test(name, async () => {
    const { context, page, shown, why, errors } = await withNotifications(me);
    const conv = await hiddenWithConversation(page, me, peer);
    await sendAs(peer, conv.id, 'for your eyes only');
    await eventually(async () => assert.equal((await shown()).length, 1), { explain: why });

    await signOut(page, me);
    await page.getByTestId('signin').waitFor();
    await eventually(async () => assert.deepEqual(await shown(), [], 'a notification of the signed-out user is left'), { timeout: SHORT, explain: why });
    await eventually(async () =>
      assert.equal(await page.evaluate(() => navigator.serviceWorker.ready.then((r) => r.pushManager.getSubscription()).then((s) => s === null)), true,
        'the browser is still subscribed to the signed-out user\'s pushes'));
    assert.deepEqual(errors, []);
    await context.close();
  });
}

/**
 * The notifications on screen, read through page (whose context records
 * its notifying) once none of its showNotification calls is under way.
 * Chromium's getNotifications() deletes from its database each stored
 * notification the platform does not yet report on screen: a read made
 * while one is being shown loses it for good (it stays on screen, and no
 * later read lists it). The check and the read run in one turn of the
 * page's event loop, so no show can start between them.
 */
function onScreen(page) {
  return page.evaluate(async () => {
    const reg = await navigator.serviceWorker.getRegistration();
    if (!reg) return [];
    while (window.__showing > 0) await new Promise((r) => setTimeout(r, 10));
    return (await reg.getNotifications()).map((x) => ({ title: x.title, body: x.body, tag: x.tag, data: x.data }));
  });
}

/**
 * The notifications on screen, read through the service worker sw once
 * none of its showNotification calls is under way (as onScreen; counted
 * once workerPushes has run in this worker).
 */
function workerOnScreen(sw) {
  return sw.evaluate(async () => {
    while (self.__showing > 0) await new Promise((r) => setTimeout(r, 10));
    return (await self.registration.getNotifications()).map((x) => ({ title: x.title, body: x.body, tag: x.tag, data: x.data }));
  });
}

/**
 * Delivers pushes to context's service worker sw as the browser's push
 * service would wake it (DevTools delivers them the same way): push(data).
 * Counts the worker's showNotification calls under way in self.__showing
 * (workerOnScreen waits for none) and holds each while self.__hold is an
 * unsettled promise. closedPageGone() waits until no page of the origin
 * is visible and focused: the worker leaves a push to such a page, and a
 * page just closed can still be among its clients for a moment on a
 * loaded machine.
 */
async function workerPushes(context, sw) {
  const blank = await context.newPage();
  const cdp = await context.newCDPSession(blank);
  const regs = [];
  cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => regs.push(...e.registrations));
  await cdp.send('ServiceWorker.enable');
  const reg = await eventually(() => {
    const r = regs.find((x) => x.scopeURL.startsWith(BASE) && !x.isDeleted);
    assert.ok(r, 'service worker registration');
    return r;
  });
  await sw.evaluate(() => {
    if (self.__showing !== undefined) return;
    self.__showing = 0;
    const show = ServiceWorkerRegistration.prototype.showNotification;
    ServiceWorkerRegistration.prototype.showNotification = async function (...args) {
      self.__showing++;
      try {
        await self.__hold;
        return await show.apply(this, args);
      } finally {
        self.__showing--;
      }
    };
  });
  const push = (data) => cdp.send('ServiceWorker.deliverPushMessage', { origin: new URL(BASE).origin, registrationId: reg.registrationId, data });
  const closedPageGone = () =>
    eventually(async () => {
      const open = await sw.evaluate(() =>
        self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then((l) => l.filter((c) => c.visibilityState === 'visible' && c.focused).length),
      );
      assert.equal(open, 0, 'the closed page is gone from the worker\'s clients');
    });
  return { push, closedPageGone };
}

/**
 * A browser context allowed to notify whose PushManager subscribes to SUB
 * (no push service is reachable here) and records the options it was
 * asked for in window.__pushOptions.
 */
async function fakePushContext() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB' });
  context.setDefaultTimeout(10000);
  await context.grantPermissions(['notifications'], { origin: BASE });
  await context.addInitScript((sub) => {
    if (!self.PushManager) return;
    const bytes = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4)), (c) => c.charCodeAt(0)).buffer;
    let current = null;
    PushManager.prototype.subscribe = async function (opts) {
      window.__pushOptions = { userVisibleOnly: opts.userVisibleOnly, key: btoa(String.fromCharCode(...new Uint8Array(opts.applicationServerKey))) };
      current = {
        endpoint: sub.endpoint,
        expirationTime: null,
        options: { applicationServerKey: opts.applicationServerKey, userVisibleOnly: opts.userVisibleOnly },
        getKey: (n) => bytes(n === 'p256dh' ? sub.p256dh : sub.auth),
        toJSON: () => ({ endpoint: sub.endpoint, expirationTime: null, keys: { p256dh: sub.p256dh, auth: sub.auth } }),
        unsubscribe: async () => ((current = null), true),
      };
      return current;
    };
    PushManager.prototype.getSubscription = async function () {
      return current;
    };
  }, SUB);
  return context;
}

/** A page of context signed in as user me, its errors collected into errors. */
async function signIn(context, me, errors) {
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(BASE);
  await page.getByTestId('dev-user').fill(String(me));
  await page.getByTestId('dev-signin').click();
  await page.locator('[data-testid=connection][data-state=online]').waitFor();
  return page;
}

/**
 * Closes page, me's only one, and waits until chatd itself has seen its
 * connection end (peer, who shares a conversation with me, sees me
 * offline): page.close() answers once the browser dropped the page, and a
 * message chatd delivered to a connection the browser had not yet torn
 * down could still be acknowledged, so not pushed. TestBrowserPush runs
 * chatd with a short presence grace for this.
 */
async function closed(page, me, peer) {
  await page.close();
  await eventually(async () => assert.equal((await api(peer, 'GET', `/v1/users/${me}/presence`)).online, false, `chatd sees user ${me} offline`));
}

/** The direct conversation peer opens with me (or what open makes), once listed on page, with the page then hidden. */
async function hiddenWithConversation(page, me, peer, open = () => api(peer, 'POST', `/v1/direct/${me}`)) {
  const conv = await open();
  await page.locator(`[data-testid=conv-row][data-conv-id="${conv.id}"]`).waitFor();
  await page.evaluate(() => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
  });
  return conv;
}

test('a click on a notification of the user signed in before opens nothing for the user signed in now', async () => {
  const me = 69;
  const peer = 68;
  const next = 70;
  const { context, page, sw, shown, why, errors } = await withNotifications(me);
  const conv = await hiddenWithConversation(page, me, peer);
  await sendAs(peer, conv.id, 'for 69');
  await eventually(async () => assert.equal((await shown()).length, 1), { explain: why });

  // Another tab signs someone else in: this page follows (signed out
  // without a sign-out of its own, so the notification stays).
  // The other tab opens signed in as 69 and registers 69's device again
  // (every page load does, notifications being on): that registration
  // is over before it signs 70 in, or it could reach chatd after this
  // page deleted the device and register it anew.
  const other = await context.newPage();
  const registered = other.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/v1/devices');
  await other.goto(BASE);
  await registered;
  const token = await devAPI(BASE).token(next);
  await other.evaluate((t) => localStorage.setItem('chatd.token', t), token);
  await other.close();
  await page.locator('[data-testid=connection][data-state=online]').waitFor();
  await eventually(async () => assert.equal(await page.evaluate(() => document.querySelector('[data-testid=app]') !== null), true));
  await page.evaluate(() => {
    window.__hashes = [];
    window.addEventListener('hashchange', () => window.__hashes.push(location.hash));
  });
  assert.equal((await shown()).length, 1, 'the notification of 69 is still on screen');
  // 69's next pushes must not come to the browser 70 is signed in at:
  // 69's device is deleted (the browser's subscription stays, 70's to use).
  await eventually(async () => assert.deepEqual((await api(me, 'GET', '/v1/devices')).devices.map((d) => d.id), [], `${me}'s device still gets ${me}'s pushes at the browser ${next} is signed in at`));

  await sw.evaluate(async () => {
    const [x] = await self.registration.getNotifications();
    self.dispatchEvent(new NotificationEvent('notificationclick', { notification: x }));
  });
  await eventually(async () => assert.equal(await sw.evaluate(() => self.registration.getNotifications().then((l) => l.length)), 0, 'the click was handled'), { timeout: SHORT });
  await stays(async () => assert.deepEqual(await page.evaluate(() => window.__hashes), [], `the click of 69's notification navigated ${next}'s page`), { duration: 500 });
  assert.deepEqual(errors, []);
  await context.close();
});
