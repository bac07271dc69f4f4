// End-to-end tests of the web client's uploads to an object store (an
// in-process fake S3): the bytes go straight to the store's presigned URL,
// then the page asks chatd to complete the upload. A completion that never
// reached chatd (the network cut it) leaves the bytes in the bucket: the
// tray's Retry completes them, before the URL expired or after, rather
// than send them again or ask for a new ticket, charged again against the
// day's bytes; a page reloaded before the completion was answered
// completes the upload when the file is picked again. Run by TestBrowserUploadWhoseCompletionWasLostIsCompletedNotSentAgain,
// which starts the store and a chatd on it; by hand:
//
//   CHATD_URL=http://127.0.0.1:8080 S3_URL=http://127.0.0.1:9000 FILE_BYTES=40000 QUOTA_BYTES=60000 node web/e2e/objectstore.spec.mjs
//
// against a chatd --dev on that store with CHAT_UPLOAD_URL_EXPIRY=1m and
// CHAT_UPLOAD_BYTES_PER_DAY=QUOTA_BYTES (a second ticket for the file is
// refused: it takes the file once, not twice). Users are 9901 and up.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { browserSpec, eventually, finish, online, openConversation, openDirect } from './helpers.mjs';

const spec = browserSpec();
const STORE = process.env.S3_URL;
if (!STORE) throw new Error('set S3_URL to the object store chatd uses (http://host:port)');
const FILE_BYTES = Number(process.env.FILE_BYTES);
const QUOTA_BYTES = Number(process.env.QUOTA_BYTES);
assert.ok(FILE_BYTES > 0 && QUOTA_BYTES >= FILE_BYTES && QUOTA_BYTES < 2 * FILE_BYTES, 'the day takes the file once, not twice');

/** A text file of FILE_BYTES, its lines numbered: chatd stores it as it is. */
function minutes() {
  let text = '';
  for (let i = 1; text.length < FILE_BYTES; i++) text += `${String(i).padStart(5, '0')} the minutes of the meeting\n`;
  return Buffer.from(text.slice(0, FILE_BYTES));
}

/**
 * What page sends of its uploads: the PUTs to the store, the ticket
 * requests to chatd, the tickets chatd answered and the completions.
 */
function watch(page) {
  const seen = { puts: [], tickets: 0, answered: [], completions: 0 };
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (r.method() === 'PUT' && url.origin === STORE) seen.puts.push(url.pathname);
    if (r.method() === 'POST' && url.pathname === '/v1/uploads') seen.tickets++;
    if (r.method() === 'POST' && /^\/v1\/uploads\/[^/]+\/complete$/.test(url.pathname)) seen.completions++;
  });
  page.on('response', async (res) => {
    if (res.request().method() === 'POST' && new URL(res.url()).pathname === '/v1/uploads' && res.ok()) seen.answered.push(await res.json());
  });
  return seen;
}

/** Has page's first request to a url matching pattern fail as a cut connection before it goes out; the others go through. */
async function cutOnce(page, pattern) {
  let cut = false;
  await page.route(pattern, (route) => {
    if (cut) return route.continue();
    cut = true;
    return route.abort('connectionreset');
  });
}

/** The tray's one item, once its upload is status. */
async function trayItem(page, status) {
  const item = page.getByTestId('tray-item');
  await eventually(async () => assert.equal(await item.getAttribute('data-status'), status, await page.getByTestId('tray-state').textContent()));
  return item;
}

/** Sends what the tray holds and checks that peer got file in it, as sent. */
async function sentAndGot(spec, a, conv, peer, file) {
  await a.page.getByTestId('send').click();
  await eventually(async () => {
    const { messages } = await spec.api(peer, 'GET', `/v1/conversations/${conv.id}/messages`);
    assert.equal(messages.length, 1);
    const [att] = messages[0].attachments ?? [];
    assert.equal(att?.size, file.length);
    assert.equal(att.sha256, createHash('sha256').update(file).digest('hex'));
  });
}

test('an upload whose completion never reached chatd is completed by Retry, its bytes not sent to the store again', async () => {
  const { conv, a } = await openDirect(spec, 9901, 9902, []);
  const seen = watch(a.page);
  await cutOnce(a.page, '**/v1/uploads/*/complete');
  const file = minutes();
  await a.page.getByTestId('file-input').setInputFiles([{ name: 'minutes.txt', mimeType: 'text/plain', buffer: file }]);
  await trayItem(a.page, 'failed');
  assert.equal(seen.puts.length, 1);
  await a.page.getByTestId('tray-retry').click();
  await trayItem(a.page, 'done');
  assert.equal(seen.puts.length, 1, `the bytes the store holds were sent again: ${JSON.stringify(seen.puts)}`);
  assert.equal(seen.tickets, 1, 'a second ticket was asked for');
  assert.equal(seen.completions, 2);
  await sentAndGot(spec, a, conv, 9902, file);
  await finish(a);
});

test("an upload whose completion never reached chatd is completed by Retry after its URL expired: no new ticket charged against the day's bytes, no bytes sent again", async () => {
  const { conv, a } = await openDirect(spec, 9903, 9904, []);
  const seen = watch(a.page);
  await cutOnce(a.page, '**/v1/uploads/*/complete');
  const file = minutes();
  await a.page.getByTestId('file-input').setInputFiles([{ name: 'minutes.txt', mimeType: 'text/plain', buffer: file }]);
  await trayItem(a.page, 'failed');
  assert.equal(seen.answered.length, 1);
  const [ticket] = seen.answered;
  // The user comes back to it once the URL expired: the store takes no
  // more bytes for it.
  await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(ticket.expiresAt) + 1500 - Date.now())));
  const late = await fetch(ticket.url, { method: 'PUT', headers: ticket.headers, body: file });
  assert.equal(late.status, 403, 'the store still takes bytes at the expired URL');
  await a.page.getByTestId('tray-retry').click();
  await trayItem(a.page, 'done');
  assert.equal(seen.puts.length, 1, `the bytes the store holds were sent again: ${JSON.stringify(seen.puts)}`);
  assert.equal(seen.tickets, 1, `a second ticket was asked for, charged again (the day takes ${QUOTA_BYTES} bytes, the file is ${FILE_BYTES})`);
  await sentAndGot(spec, a, conv, 9904, file);
  await finish(a);
});

test('an upload whose PUT never reached the store is sent again by Retry, to the same ticket', async () => {
  const { conv, a } = await openDirect(spec, 9905, 9906, []);
  const seen = watch(a.page);
  await cutOnce(a.page, `${STORE}/**`);
  const file = minutes();
  await a.page.getByTestId('file-input').setInputFiles([{ name: 'minutes.txt', mimeType: 'text/plain', buffer: file }]);
  await trayItem(a.page, 'failed');
  await a.page.getByTestId('tray-retry').click();
  await trayItem(a.page, 'done');
  assert.equal(seen.puts.length, 2);
  assert.equal(seen.puts[0], seen.puts[1], 'the retry PUT to another URL');
  assert.equal(seen.tickets, 1, 'a second ticket was asked for');
  await sentAndGot(spec, a, conv, 9906, file);
  await finish(a);
});

test('a page reloaded after the store took the bytes, before the completion was answered, completes that upload when the file is picked again: no PUT, no ticket again', async () => {
  const { conv, a } = await openDirect(spec, 9907, 9908, []);
  const seen = watch(a.page);
  // Picked from disk, as a user picks it: picked again, the same name,
  // size, type and modification time.
  const dir = mkdtempSync(join(tmpdir(), 'chatd-objectstore-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = minutes();
  const path = join(dir, 'minutes.txt');
  writeFileSync(path, file);
  // The completion leaves the page and goes nowhere; the page is reloaded.
  let held = 0;
  await a.page.route('**/v1/uploads/*/complete', () => held++);
  await a.page.getByTestId('file-input').setInputFiles(path);
  await eventually(async () => assert.equal(held, 1));
  await a.page.unrouteAll({ behavior: 'ignoreErrors' });
  await a.page.reload();
  await online(a.page, 20000);
  await openConversation(a.page, conv.id);
  await eventually(async () => assert.match(await a.page.getByTestId('tray-waiting').textContent(), /pick the file again to resume/i));
  await a.page.getByTestId('file-input').setInputFiles(path);
  await trayItem(a.page, 'done');
  assert.equal(seen.puts.length, 1, `the bytes the store holds were sent again: ${JSON.stringify(seen.puts)}`);
  assert.equal(seen.tickets, 1, `a second ticket was asked for, charged again (the day takes ${QUOTA_BYTES} bytes, the file is ${FILE_BYTES})`);
  await sentAndGot(spec, a, conv, 9908, file);
  await finish(a);
});
