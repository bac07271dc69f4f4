// End-to-end tests of the web client in a real, headless Chromium against a
// real chatd (embedded PostgreSQL). web/browser_test.go starts chatd in dev
// mode and runs this file; to run it by hand against your own `chatd --dev`:
//
//   CHATD_URL=http://127.0.0.1:8080 node web/e2e/chat.spec.mjs
//
// Env: CHATD_URL (required), CHROMIUM_PATH (default /usr/bin/chromium),
// SCREENSHOT_DIR (where inbox.png, conversation.png, phone.png and attachments.png go; none
// are written when empty). Every scenario uses its own user ids, so the
// scenarios do not see each other's conversations.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import zlib from 'node:zlib';
import { browserSpec, assertClean, bodies, devSignIn, eventually, finish, inboxFacts, offline, online, openConversation, row, send, stays, unread } from './helpers.mjs';
import { startProxy } from './proxy.mjs';

const spec = browserSpec();
const { BASE, pages, token, api, sendAs } = spec;
const SHOTS = process.env.SCREENSHOT_DIR || '';

// ---------------------------------------------------------------- helpers

/**
 * Opens a fresh browser context (its own storage: a separate person) and
 * signs in through the dev sign-in form.
 */
async function signIn(uid, { base = BASE, ...opts } = {}) {
  const rec = await devSignIn(spec.browser, pages, uid, { base, ...opts });
  await rec.page.getByTestId('me').filter({ hasText: `User ${uid}` }).waitFor();
  return rec;
}

const closeConversation = (page) => page.evaluate(() => (location.hash = ''));

/** [seq, status] of every message on screen. */
const seqs = (page) =>
  page.getByTestId('message').evaluateAll((els) => els.map((e) => [e.dataset.seq ? Number(e.dataset.seq) : null, e.dataset.status]));

/** The receipt under our newest message ("Sent", "Seen", "Seen by 2"). */
const lastReceipt = (page) =>
  page.evaluate(() => {
    const shown = [...document.querySelectorAll('[data-testid=message][data-status=sent] [data-testid=receipt]')].filter((e) => !e.hidden);
    return shown.length ? shown[shown.length - 1].textContent : null;
  });

const currentConvId = async (page) => Number(await page.getByTestId('conversation').getAttribute('data-conv-id'));

async function dialog(page, opener, values) {
  await page.getByTestId(opener).click();
  for (const [k, v] of Object.entries(values)) await page.getByTestId(`dialog-${k}`).fill(v);
  await page.getByTestId('dialog-submit').click();
  await page.getByTestId('dialog').waitFor({ state: 'detached' });
}

// ---------------------------------------------------------------- files

const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * A w×h PNG: an evening sky, a sun and a horizon, with a photo's grain
 * (so it is as large as a photo: about 1 byte a pixel).
 */
function photoPNG(w, hgt) {
  const raw = Buffer.alloc((w * 3 + 1) * hgt);
  let seed = 7;
  const grain = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 29) - 4;
  for (let y = 0; y < hgt; y++) {
    raw[y * (w * 3 + 1)] = 0;
    for (let x = 0; x < w; x++) {
      const i = y * (w * 3 + 1) + 1 + x * 3;
      const sky = y < hgt * 0.68;
      const dx = x - w * 0.62, dy = y - hgt * 0.55;
      const sun = dx * dx + dy * dy < (hgt * 0.12) ** 2;
      const t = y / hgt;
      raw[i] = Math.max(0, Math.min(255, (sun ? 250 : sky ? 40 + 200 * t : 30 + 20 * Math.sin(x / 9)) + grain()));
      raw[i + 1] = Math.max(0, Math.min(255, (sun ? 214 : sky ? 60 + 90 * t : 50 + 30 * t) + grain()));
      raw[i + 2] = Math.max(0, Math.min(255, (sun ? 120 : sky ? 140 - 60 * t : 90) + grain()));
    }
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(hgt, 4);
  ihdr[8] = 8; // 8-bit
  ihdr[9] = 2; // RGB
  return Buffer.concat([
    Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** ms of 8 kHz 16-bit mono: a quiet voice note. */
function voiceWAV(ms) {
  const n = Math.floor((8000 * 2 * ms) / 1000);
  const b = Buffer.alloc(44 + n);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + n, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(16000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36);
  b.writeUInt32LE(n, 40);
  for (let i = 0; i < n / 2; i++) b.writeInt16LE(Math.round(3000 * Math.sin(i / 6) * Math.sin(i / 4000)), 44 + i * 2);
  return b;
}

const PDF = Buffer.from('%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n');

/** Adds files through the attach button's input and waits for the tray. */
async function attach(page, files) {
  await page.getByTestId('file-input').setInputFiles(files);
  await eventually(async () => {
    const states = await page.getByTestId('tray-item').evaluateAll((els) => els.map((e) => e.dataset.status));
    assert.ok(states.length === files.length && states.every((s) => s === 'done'), `tray: ${states}`);
  });
}

// -------------------------------------------------------------- scenarios

test('direct chat: messages in order, live unread badges, typing, "Seen"', async () => {
  const a = await signIn(101);
  const b = await signIn(102);

  await dialog(a.page, 'new-direct', { peer: '102' });
  await a.page.getByTestId('chat-title').filter({ hasText: 'User 102' }).waitFor();
  const cid = await currentConvId(a.page);

  await send(a.page, 'Hi, are you there?');
  await send(a.page, 'Lunch at noon?');
  // Optimistic display first, then the seq from the PUBACK.
  await eventually(async () => assert.deepEqual(await seqs(a.page), [[1, 'sent'], [2, 'sent']]));

  // B never reloaded: the conversation and its badge arrive live.
  await eventually(async () => assert.equal(await unread(b.page, cid), 2));
  await openConversation(b.page, cid);
  assert.deepEqual(await bodies(b.page), ['Hi, are you there?', 'Lunch at noon?']);
  await eventually(async () => assert.equal(await unread(b.page, cid), 0));
  await eventually(async () => assert.equal(await lastReceipt(a.page), 'Seen'));

  // Typing indicator, shown for about 3 s.
  await b.page.getByTestId('composer').pressSequentially('Sure', { delay: 30 });
  await eventually(async () => assert.equal(await a.page.getByTestId('typing').textContent(), 'User 102 is typing…'));
  await b.page.getByTestId('composer').press('Enter');
  await eventually(async () => assert.deepEqual(await bodies(a.page), ['Hi, are you there?', 'Lunch at noon?', 'Sure']));
  // The sender's new message ended the indicator at once.
  assert.equal(await a.page.getByTestId('typing').textContent(), '');
  // A has the chat open and visible: it reads at once, no badge.
  await eventually(async () => assert.equal(await unread(a.page, cid), 0));

  // With the chat closed, B's messages raise A's badge live.
  await closeConversation(a.page);
  await a.page.getByTestId('no-conversation').waitFor();
  await send(b.page, 'Bring the slides');
  await send(b.page, 'Room 4B');
  await eventually(async () => assert.equal(await unread(a.page, cid), 2));
  await eventually(async () => assert.equal(await lastReceipt(b.page), 'Sent'));
  await openConversation(a.page, cid);
  await eventually(async () => assert.equal(await unread(a.page, cid), 0));
  await eventually(async () => assert.equal(await lastReceipt(b.page), 'Seen'));

  const want = ['Hi, are you there?', 'Lunch at noon?', 'Sure', 'Bring the slides', 'Room 4B'];
  for (const p of [a.page, b.page]) {
    await eventually(async () => assert.deepEqual(await bodies(p), want));
    assert.deepEqual(await seqs(p), want.map((_, i) => [i + 1, 'sent']));
  }
  await finish(a, b);
});

test('group of three: add member, "Seen by 2"', async () => {
  const owner = await signIn(201);
  const m2 = await signIn(202);
  const m3 = await signIn(203);

  await dialog(owner.page, 'new-group', { title: 'Project Atlas', members: '202' });
  await owner.page.getByTestId('chat-title').filter({ hasText: 'Project Atlas' }).waitFor();
  const cid = await currentConvId(owner.page);
  await eventually(async () => assert.equal(await owner.page.getByTestId('chat-subtitle').textContent(), '2 members'));
  await dialog(owner.page, 'add-member', { user: '203' });
  await eventually(async () => assert.equal(await owner.page.getByTestId('chat-subtitle').textContent(), '3 members'));

  await send(owner.page, 'Kickoff is at 10:00 tomorrow');
  await eventually(async () => assert.equal(await lastReceipt(owner.page), 'Sent'));

  for (const m of [m2, m3]) {
    await eventually(async () => assert.equal(await unread(m.page, cid), 1));
    await openConversation(m.page, cid);
    await eventually(async () => assert.deepEqual(await bodies(m.page), ['Kickoff is at 10:00 tomorrow']));
  }
  await eventually(async () => assert.equal(await lastReceipt(owner.page), 'Seen by 2'));

  // Others' messages carry their name in a group.
  await send(m3.page, 'Works for me');
  await eventually(async () => assert.ok((await owner.page.locator('.msg.theirs .sender').allTextContents()).includes('User 203')));
  await finish(owner, m2, m3);
});

test('user text is never markup: an <img onerror> body and title render literally', async () => {
  const a = await signIn(301);
  const b = await signIn(302);
  const evil = '<img src=x onerror=alert(1)>';
  const evilTitle = '<b>bold</b><script>alert(2)</script>';
  const direct = await api(301, 'POST', '/v1/direct/302');
  const group = await api(301, 'POST', '/v1/conversations', { type: 'group', title: evilTitle, members: [302] });

  await eventually(async () => assert.equal(await row(a.page, direct.id).count(), 1));
  await openConversation(a.page, direct.id);
  await send(a.page, evil);
  await sendAs(301, group.id, `"quoted" & <i>not italic</i>`);

  await eventually(async () => assert.equal(await unread(b.page, direct.id), 1));
  await eventually(async () => assert.equal(await row(b.page, group.id).getByTestId('conv-title').textContent(), evilTitle));
  await openConversation(b.page, direct.id);
  await b.page.getByTestId('message-body').filter({ hasText: evil }).waitFor();
  assert.deepEqual(await bodies(b.page), [evil]);
  await openConversation(b.page, group.id);
  await eventually(async () => assert.deepEqual(await bodies(b.page), [`"quoted" & <i>not italic</i>`]));
  assert.equal(await b.page.getByTestId('chat-title').textContent(), evilTitle);

  // Give a would-be onerror handler time to fire, and check nothing did.
  await stays(async () => {
    for (const r of [a, b]) {
      assert.equal(await r.page.locator('#app img, #app script, #app b, #app i').count(), 0, `user ${r.uid}: markup from user text`);
    }
  }, { duration: 500 });
  await finish(a, b);
});

test('network cut and restored: messages sent meanwhile appear once, in order', async () => {
  const proxy = await startProxy(BASE);
  try {
    const direct = await api(402, 'POST', '/v1/direct/401');
    const cid = direct.id;
    await sendAs(402, cid, 'before the cut');

    const a = await signIn(401, { base: proxy.url });
    await openConversation(a.page, cid);
    await eventually(async () => assert.deepEqual(await bodies(a.page), ['before the cut']));

    // 1) Cut while the chat is open; the peer keeps talking; A writes too.
    proxy.cut();
    await offline(a.page);
    for (let i = 1; i <= 5; i++) await sendAs(402, cid, `while away ${i}`);
    await send(a.page, 'written offline');
    // The pending bubble renders once the client has queued the send
    // (asynchronously: a loaded CI machine showed the list before it).
    await eventually(async () => assert.deepEqual((await seqs(a.page)).at(-1), [null, 'sending']));
    // Still cut, it stays unsent.
    await stays(async () => assert.deepEqual((await seqs(a.page)).at(-1), [null, 'sending']), { duration: 1500 });
    proxy.restore();
    await online(a.page, 20000);

    const want = ['before the cut', 'while away 1', 'while away 2', 'while away 3', 'while away 4', 'while away 5', 'written offline'];
    await eventually(async () => assert.deepEqual(await bodies(a.page), want));
    await eventually(async () => assert.deepEqual(await seqs(a.page), want.map((_, i) => [i + 1, 'sent'])));
    // The persistent session replays and afterSeq refetches the same
    // messages: no duplicate may come with a straggler.
    await stays(async () => assert.deepEqual(await bodies(a.page), want));

    // 2) Cut with the chat closed: the badge counts each message once.
    await closeConversation(a.page);
    await a.page.getByTestId('no-conversation').waitFor();
    proxy.cut();
    await offline(a.page);
    for (let i = 1; i <= 3; i++) await sendAs(402, cid, `second cut ${i}`);
    proxy.restore();
    await online(a.page, 20000);
    await eventually(async () => assert.equal(await unread(a.page, cid), 3));
    await stays(async () => assert.equal(await unread(a.page, cid), 3));
    await openConversation(a.page, cid);
    const all = [...want, 'second cut 1', 'second cut 2', 'second cut 3'];
    await eventually(async () => assert.deepEqual(await bodies(a.page), all));
    assert.deepEqual(await seqs(a.page), all.map((_, i) => [i + 1, 'sent']));
    await finish(a);
  } finally {
    await proxy.close();
  }
});

test('a refused send shows "Not sent" with Retry, keeping its clientMsgId', async () => {
  const a = await signIn(501);
  const direct = await api(501, 'POST', '/v1/direct/502');
  await eventually(async () => assert.equal(await row(a.page, direct.id).count(), 1));
  await openConversation(a.page, direct.id);

  // 502 blocks 501: PUBACK 0x87 (blocked), a refusal a retry may outlive
  // (a too-large text offers Edit instead: toolong.spec.mjs).
  await api(502, 'PUT', '/v1/me/blocks/501');
  await send(a.page, 'refused for now');
  const failed = a.page.locator('[data-testid=message][data-status=failed]');
  await failed.waitFor();
  const id = await failed.getAttribute('data-client-msg-id');
  assert.equal(await failed.getByTestId('receipt').textContent(), 'Not sent');
  const refusals = async () => {
    const text = await (await fetch(`${BASE}/metrics`)).text();
    return Number(/^chat_mqtt_publishes_total\{kind="msg",outcome="blocked"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  };
  const before = await refusals();
  await failed.getByTestId('retry').click();
  // Retried with the same clientMsgId (same row), refused again: chatd
  // answered it (counted) before the block is lifted below.
  await eventually(async () => {
    assert.equal(await refusals(), before + 1);
    assert.equal(await a.page.locator(`[data-client-msg-id="${id}"]`).getAttribute('data-status'), 'failed');
  });
  assert.equal(await a.page.getByTestId('message').count(), 1);

  // The connection stays usable. (Unsent messages stay at the bottom.)
  await api(502, 'DELETE', '/v1/me/blocks/501');
  await send(a.page, 'short one');
  const ok = a.page.locator('[data-testid=message]', { has: a.page.getByTestId('message-body').filter({ hasText: /^short one$/ }) });
  await eventually(async () => assert.equal(await ok.getAttribute('data-status'), 'sent'));
  assert.equal(await ok.getAttribute('data-seq'), '1');
  await finish(a);
});

test('history loads on scroll up without gaps or duplicates', async () => {
  const direct = await api(601, 'POST', '/v1/direct/602');
  for (let i = 1; i <= 120; i++) await sendAs(i % 2 ? 602 : 601, direct.id, `message ${i}`);
  const a = await signIn(601, { viewport: { width: 1024, height: 700 } });
  await openConversation(a.page, direct.id);
  await eventually(async () => assert.equal((await bodies(a.page)).at(-1), 'message 120'));
  const first = (await bodies(a.page)).length;
  assert.ok(first < 120, `only the newest page is loaded at first (got ${first})`);
  await eventually(
    async () => {
      await a.page.getByTestId('messages').evaluate((el) => (el.scrollTop = 0));
      assert.equal((await bodies(a.page)).length, 120);
    },
    { timeout: 20000, interval: 300 },
  );
  assert.deepEqual(await bodies(a.page), Array.from({ length: 120 }, (_, i) => `message ${i + 1}`));
  assert.equal(await a.page.getByTestId('older').textContent(), 'This is the beginning of the conversation.');
  await finish(a);
});

test('sign in by pasting a token; bad tokens are explained; sign out', async () => {
  const context = await spec.browser.newContext();
  context.setDefaultTimeout(10000);
  const page = await context.newPage();
  const rec = { uid: 901, page, context, dialogs: [], errors: [] };
  page.on('pageerror', (e) => rec.errors.push(`pageerror: ${e.message}`));
  await page.goto(BASE);

  await page.getByTestId('token-input').fill('not-a-token');
  await page.getByRole('button', { name: 'Sign in with token' }).click();
  await eventually(async () => assert.match(await page.getByTestId('signin-error').textContent(), /not a JWT/));

  await page.getByTestId('token-input').fill(await token(901));
  await page.getByRole('button', { name: 'Sign in with token' }).click();
  await online(page);
  assert.equal(await page.getByTestId('me').textContent(), 'User 901');

  // A reload stays signed in and resumes the same MQTT session.
  await page.reload();
  await online(page);
  assert.equal(await page.getByTestId('me').textContent(), 'User 901');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByTestId('signin').waitFor();
  assert.equal(await page.evaluate(() => localStorage.getItem('chatd.token')), null);
  assertClean(rec);
  await context.close();
});

test('signing out in one tab signs out every tab of the browser: none keeps showing or receiving the conversations', async () => {
  const direct = await api(912, 'POST', '/v1/direct/911');
  await sendAs(912, direct.id, 'for 911 only');
  const a = await signIn(911);
  // A second tab of the same browser: signed in by the stored token.
  const other = await a.context.newPage();
  other.on('pageerror', (e) => a.errors.push(`pageerror: ${e.message}`));
  await other.goto(BASE);
  await online(other);
  await openConversation(other, direct.id);
  await eventually(async () => assert.deepEqual(await bodies(other), ['for 911 only']));

  await a.page.getByRole('button', { name: 'Sign out' }).click();
  await a.page.getByTestId('signin').waitFor();
  await other.getByTestId('signin').waitFor();
  assert.deepEqual(await bodies(other), [], 'the other tab shows no message');
  await sendAs(912, direct.id, 'after the sign-out');
  await eventually(async () => assert.equal((await api(911, 'GET', `/v1/conversations/${direct.id}/messages?limit=5`)).messages.length, 2));
  assert.equal(await other.getByTestId('app').count(), 0, 'the other tab is not signed in');
  assertClean(a);
  await a.context.close();
});

test('attachments: a photo another user sees as a thumbnail then full size, a voice note, a file, a failed upload retried', async () => {
  const a = await signIn(701);
  const b = await signIn(702);
  const direct = await api(701, 'POST', '/v1/direct/702');
  const cid = direct.id;
  await eventually(async () => assert.equal(await row(a.page, cid).count(), 1));
  await openConversation(a.page, cid);

  // A photo, with a caption typed in the composer: the tray shows it
  // uploading (progress), then the message carries it.
  // Uploads at 512 KB/s (Chromium's network emulation), so the progress
  // shows on the way.
  const cdp = await a.context.newCDPSession(a.page);
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 512 * 1024 });
  const photo = photoPNG(1200, 800);
  await a.page.getByTestId('file-input').setInputFiles([{ name: 'sunset.png', mimeType: 'image/png', buffer: photo }]);
  const progress = new Set();
  await eventually(
    async () => {
      progress.add(await a.page.getByTestId('tray-state').textContent());
      assert.equal(await a.page.getByTestId('tray-item').getAttribute('data-status'), 'done');
    },
    { interval: 20 },
  );
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  assert.ok([...progress].some((p) => /^([1-9]|[1-9][0-9])%$/.test(p)), `progress seen: ${[...progress]}`);
  await a.page.getByTestId('composer').fill('Tonight from the balcony');
  await a.page.getByTestId('composer').press('Enter');
  await eventually(async () => assert.deepEqual(await seqs(a.page), [[1, 'sent']]));
  assert.equal(await a.page.getByTestId('tray').isHidden(), true, 'the tray empties once sent');

  // The other user sees the picture: the thumbnail first (at most 320 px),
  // a click shows it full size.
  await eventually(async () => assert.equal(await unread(b.page, cid), 1));
  await openConversation(b.page, cid);
  const thumb = b.page.getByTestId('attachment-image');
  await eventually(async () => {
    const [nw, nh] = await thumb.evaluate((img) => [img.naturalWidth, img.naturalHeight]);
    assert.ok(nw === 320 && nh === 213, `thumbnail ${nw}×${nh}`);
  });
  assert.match(await thumb.getAttribute('src'), /^blob:/);
  assert.deepEqual(await bodies(b.page), ['Tonight from the balcony']);
  await thumb.click();
  const full = b.page.getByTestId('lightbox-image');
  await eventually(async () => assert.deepEqual(await full.evaluate((img) => [img.naturalWidth, img.naturalHeight]), [1200, 800]));
  await b.page.keyboard.press('Escape');
  await b.page.getByTestId('lightbox').waitFor({ state: 'detached' });

  // A voice note and a document in one message, no text.
  await attach(a.page, [
    { name: 'voice-note.wav', mimeType: 'audio/wav', buffer: voiceWAV(3200) },
    { name: 'Minutes 2026-03.pdf', mimeType: 'application/pdf', buffer: PDF },
  ]);
  await a.page.getByTestId('send').click();
  await eventually(async () => assert.equal(await b.page.getByTestId('attachment-audio').count(), 1));
  await eventually(async () => {
    const d = await b.page.getByTestId('attachment-audio').evaluate((el) => el.duration);
    assert.ok(Math.abs(d - 3.2) < 0.2, `audio duration ${d}`);
  });
  const chip = b.page.getByTestId('attachment-file');
  assert.match(await chip.textContent(), /Minutes 2026-03\.pdf/);
  const download = b.page.waitForEvent('download');
  await chip.click();
  assert.equal((await download).suggestedFilename(), 'Minutes 2026-03.pdf');
  // The inbox says what the last message was.
  await closeConversation(a.page);
  await eventually(async () => assert.match(await row(a.page, cid).textContent(), /🎤 Voice message/));
  await openConversation(a.page, cid);

  // The network fails during an upload: the file shows "failed" with
  // Retry, which sends it again.
  let cut = true;
  await a.page.route('**/v1/uploads/*', (route) => {
    if (route.request().method() === 'PUT' && cut) {
      cut = false;
      return route.abort('connectionreset');
    }
    return route.continue();
  });
  await a.page.getByTestId('file-input').setInputFiles([{ name: 'harbour.png', mimeType: 'image/png', buffer: photoPNG(640, 480) }]);
  const item = a.page.getByTestId('tray-item');
  await eventually(async () => assert.equal(await item.getAttribute('data-status'), 'failed'));
  assert.equal(await a.page.getByTestId('send').isDisabled(), true, 'nothing is sent while a file failed');
  await a.page.getByTestId('tray-retry').click();
  await eventually(async () => assert.equal(await item.getAttribute('data-status'), 'done'));
  await a.page.getByTestId('send').click();
  await eventually(async () => assert.equal(await b.page.getByTestId('attachment-image').count(), 2));
  await eventually(async () => {
    const widths = await b.page.getByTestId('attachment-image').evaluateAll((els) => els.map((e) => e.naturalWidth));
    assert.deepEqual(widths, [320, 320]);
  });
  await send(b.page, 'Beautiful! Is the second one the harbour?');
  await eventually(async () => assert.equal((await seqs(b.page)).at(-1)[1], 'sent'));
  await b.page.mouse.move(0, 0);
  if (SHOTS) await b.page.screenshot({ path: path.join(SHOTS, 'attachments.png') });
  await finish(a, b);
});

test('a click or Enter on a conversation opens it though the inbox is rebuilt meanwhile (press and release, keyboard focus)', async () => {
  // A row may be rebuilt while it is measured (null): measure again.
  const boxOf = async (loc) => {
    let b = null;
    await eventually(async () => assert.ok((b = await loc.boundingBox())));
    return b;
  };
  // Presses on cid's row and has peer send body while the button is down:
  // the inbox is rebuilt under the pointer, the row showing n unread.
  const pressWhileRebuilt = async (cid, peer, body, n) => {
    const box = await boxOf(row(a.page, cid));
    await a.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await a.page.mouse.down();
    const pressed = await row(a.page, cid).elementHandle();
    await sendAs(peer, cid, body);
    await eventually(async () => assert.equal(await unread(a.page, cid), n), { explain: () => inboxFacts(a.page) });
    assert.equal(await pressed.evaluate((el) => el.isConnected), false, 'the inbox was not rebuilt while the button was down');
  };
  const d = await api(261, 'POST', '/v1/direct/262');
  await sendAs(262, d.id, 'first');
  const a = await signIn(261);
  await eventually(async () => assert.equal(await unread(a.page, d.id), 1), { explain: () => inboxFacts(a.page) });
  // Press on the row, let a message arrive (the inbox is rebuilt: the row
  // under the pointer is a new element, still the same conversation, still
  // on top), then release: the click is the user's, and it opens the chat.
  await pressWhileRebuilt(d.id, 262, 'second', 2);
  await a.page.mouse.up();
  await a.page.locator(`[data-testid=conversation][data-conv-id="${d.id}"]`).waitFor({ timeout: 5000 });
  await eventually(async () => assert.deepEqual(await bodies(a.page), ['first', 'second']));
  // Pressed on one conversation and released on another is no click.
  const e = await api(261, 'POST', '/v1/direct/263');
  await sendAs(263, e.id, 'elsewhere');
  await closeConversation(a.page);
  await a.page.getByTestId('no-conversation').waitFor();
  await row(a.page, e.id).waitFor();
  // The new conversation's row settles on top (its message is the
  // newest) before the rows are measured: pressed while it still moved
  // up, the press would land on the other conversation's row.
  await eventually(async () => assert.ok((await boxOf(row(a.page, e.id))).y < (await boxOf(row(a.page, d.id))).y, 'the new conversation is not above'));
  const below = await boxOf(row(a.page, d.id));
  // The pressed row is rebuilt before the release too: the browser then
  // sends its click to the row under the pointer, which is not the one
  // pressed.
  await pressWhileRebuilt(e.id, 263, 'elsewhere again', 2);
  await a.page.mouse.move(below.x + below.width / 2, below.y + below.height / 2);
  await a.page.mouse.up();
  await a.page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  assert.equal(await a.page.locator('[data-testid=conversation]').count(), 0, 'a press on one conversation released on another opened one');
  await a.page.getByTestId('no-conversation').waitFor();
  // A keyboard user's focus stays on the conversation's row through a
  // rebuild, and Enter opens it.
  await row(a.page, d.id).focus();
  await sendAs(262, d.id, 'third');
  await eventually(async () => assert.equal(await unread(a.page, d.id), 1), { explain: () => inboxFacts(a.page) });
  assert.equal(await a.page.evaluate(() => document.activeElement?.dataset?.convId), String(d.id));
  await a.page.keyboard.press('Enter');
  await a.page.locator(`[data-testid=conversation][data-conv-id="${d.id}"]`).waitFor({ timeout: 5000 });
  await finish(a);
});

test('screenshots, and a single column on a phone-sized screen', async () => {
  // A small, plausible inbox for user 1.
  const d2 = await api(1, 'POST', '/v1/direct/2');
  const design = await api(1, 'POST', '/v1/conversations', { type: 'group', title: 'Design review', members: [2, 3] });
  const release = await api(3, 'POST', '/v1/conversations', { type: 'group', title: 'Release 1.4', members: [1, 2, 4] });
  const d4 = await api(4, 'POST', '/v1/direct/1');
  await sendAs(2, d2.id, 'Did the staging deploy go through?');
  await sendAs(1, d2.id, 'Yes, 10 minutes ago. Migrations ran clean.');
  await sendAs(2, d2.id, 'Great, I will start the smoke tests.');
  await api(1, 'POST', `/v1/conversations/${d2.id}/read`, { seq: 3 });
  await sendAs(3, release.id, 'Branch cut is on Thursday.');
  await sendAs(4, release.id, 'I still have two fixes to land.');
  await sendAs(3, release.id, 'Fine, get them reviewed by Wednesday.');
  await sendAs(2, design.id, 'New mockups for the inbox are up.');
  await sendAs(3, design.id, 'The unread badges look much clearer now.');
  await sendAs(1, design.id, 'Agreed. Let us ship the compact row height as well.');
  await sendAs(2, design.id, 'On it. I will also check the phone layout.');
  await sendAs(1, design.id, 'Thanks! Review at 3 pm?');
  await api(2, 'POST', `/v1/conversations/${design.id}/read`, { seq: 5 });
  await api(3, 'POST', `/v1/conversations/${design.id}/read`, { seq: 5 });
  await sendAs(4, d4.id, 'Are you around for a quick call?');
  await sendAs(4, d4.id, 'It is about the on-call rota.');

  const a = await signIn(1);
  await eventually(async () => assert.equal(await a.page.getByTestId('conv-row').count(), 4));
  await eventually(async () => assert.equal(await unread(a.page, release.id), 3));
  await eventually(async () => assert.equal(await unread(a.page, d4.id), 2));
  // Members load in the background: wait for every direct chat's name.
  await eventually(async () => assert.ok(!(await a.page.getByTestId('conv-title').allTextContents()).includes('Direct message')));
  if (SHOTS) await a.page.screenshot({ path: path.join(SHOTS, 'inbox.png') });

  await openConversation(a.page, design.id);
  await eventually(async () => assert.equal(await lastReceipt(a.page), 'Seen by 2'));
  await a.page.getByTestId('composer').fill('Sounds good');
  await a.page.mouse.move(0, 0);
  if (SHOTS) await a.page.screenshot({ path: path.join(SHOTS, 'conversation.png') });
  await a.context.close();

  const phone = await signIn(1, { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
  const p = phone.page;
  const sidebar = p.locator('.sidebar');
  // Inbox only: the sidebar takes the whole width.
  assert.equal(Math.round((await sidebar.boundingBox()).width), 390);
  await openConversation(p, d2.id);
  assert.equal(await sidebar.isVisible(), false, 'the inbox hides while a chat is open');
  assert.equal(Math.round((await p.getByTestId('conversation').boundingBox()).width), 390);
  await eventually(async () => assert.equal((await bodies(p)).length, 3));
  if (SHOTS) await p.screenshot({ path: path.join(SHOTS, 'phone.png') });
  await p.getByTestId('back').click();
  await sidebar.waitFor({ state: 'visible' });
  assertClean(a, phone);
  await phone.context.close();
});
