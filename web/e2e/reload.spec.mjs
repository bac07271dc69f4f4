// End-to-end tests of an upload the page is reloaded in the middle of (a
// weak mobile network, a crashed tab): the tray kept its ticket in the
// browser, shows it after the reload ("pick the file again to resume"),
// and the same file picked again goes on with that upload, charged once
// against the day's bytes, rather than a new ticket charged again. Run by
// TestBrowserUploadInterruptedByAReloadIsResumedWhenTheFileIsPickedAgain,
// which starts a chatd whose day's byte quota takes the file once, not
// twice (the two-tab scenario uses a file small enough for three); by hand:
//
//   CHATD_URL=http://127.0.0.1:8080 FILE_BYTES=40000 QUOTA_BYTES=60000 node web/e2e/reload.spec.mjs
//
// against a chatd --dev with CHAT_UPLOAD_BYTES_PER_DAY=QUOTA_BYTES. Users
// are 9951 and up.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { browserSpec, eventually, finish, online, openConversation, openDirect } from './helpers.mjs';

const spec = browserSpec();
const FILE_BYTES = Number(process.env.FILE_BYTES);
const QUOTA_BYTES = Number(process.env.QUOTA_BYTES);
assert.ok(FILE_BYTES > 0 && QUOTA_BYTES >= FILE_BYTES && QUOTA_BYTES < 2 * FILE_BYTES, 'the day takes the file once, not twice');

// The file the user picks, on disk as a picked file is: picked again, it
// has the same name, size, type and modification time.
const dir = mkdtempSync(join(tmpdir(), 'chatd-reload-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A text file of FILE_BYTES on disk, its lines numbered: its path and bytes. */
function minutes(name) {
  let text = '';
  for (let i = 1; text.length < FILE_BYTES; i++) text += `${String(i).padStart(5, '0')} the minutes of the meeting\n`;
  const bytes = Buffer.from(text.slice(0, FILE_BYTES));
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return { path, bytes };
}

/** The Idempotency-Keys of the ticket requests of every page watched. */
const keysAsked = new Set();

/**
 * Whether ticket request r asks for a new upload, charged: one asked
 * again with a key asked before (a reload gets a kept ticket's URL so,
 * the URL not kept) is answered that upload, charged nothing.
 */
function newUpload(r) {
  const key = r.headers()['idempotency-key'];
  const fresh = !key || !keysAsked.has(key);
  if (key) keysAsked.add(key);
  return fresh;
}

/** What page asks chatd for: new uploads (POST /v1/uploads with a new key), and the PUTs of the bytes. */
function watch(page) {
  const seen = { tickets: 0, puts: [] };
  page.on('request', (r) => {
    const path = new URL(r.url()).pathname;
    if (r.method() === 'POST' && path === '/v1/uploads' && newUpload(r)) seen.tickets++;
    if (r.method() === 'PUT' && /^\/v1\/uploads\/[^/]+$/.test(path)) seen.puts.push(path);
  });
  return seen;
}

/** The tray's one item, once its upload is status. */
async function trayItem(page, status) {
  const item = page.getByTestId('tray-item');
  await eventually(async () => assert.equal(await item.getAttribute('data-status'), status, await page.getByTestId('tray-state').textContent()));
  return item;
}

/** Reloads page in the middle of what it was doing, and opens conversation cid again. */
async function reload(page, cid) {
  await page.reload();
  await online(page, 20000);
  await openConversation(page, cid);
}

/** After the reload: the tray says to pick the file again; picked, it is sent in a message and peer gets it as it is. */
async function pickAgainAndSend(a, conv, peer, file, seen) {
  const waiting = a.page.getByTestId('tray-waiting');
  await eventually(async () => assert.match(await waiting.textContent(), /minutes\.txt.*pick the file again to resume/i));
  await a.page.getByTestId('file-input').setInputFiles(file.path);
  await trayItem(a.page, 'done');
  assert.equal(await waiting.count(), 0, 'the file picked again is still shown as waiting for it');
  assert.equal(seen.tickets, 1, `a second ticket was asked for, charged again (the day takes ${QUOTA_BYTES} bytes, the file is ${FILE_BYTES})`);
  assert.equal(new Set(seen.puts).size, 1, `the bytes went to another upload: ${JSON.stringify(seen.puts)}`);
  await a.page.getByTestId('send').click();
  await eventually(async () => {
    const { messages } = await spec.api(peer, 'GET', `/v1/conversations/${conv.id}/messages`);
    assert.equal(messages.length, 1);
    const [att] = messages[0].attachments ?? [];
    assert.equal(att?.size, file.bytes.length);
    assert.equal(att.sha256, createHash('sha256').update(file.bytes).digest('hex'));
  });
  // Sent: another reload shows nothing more to resume.
  await reload(a.page, conv.id);
  await trayGone(a.page);
}

async function trayGone(page) {
  await page.getByTestId('composer').waitFor();
  assert.equal(await page.getByTestId('tray-waiting').count(), 0, 'an upload sent in a message is still shown to resume');
  assert.equal(await page.getByTestId('tray').isHidden(), true);
}

test("a page reloaded while it PUT a file resumes that upload when the file is picked again: one ticket, charged once against the day's bytes", async () => {
  const { conv, a } = await openDirect(spec, 9951, 9952, []);
  const seen = watch(a.page);
  const file = minutes('minutes.txt');
  // The PUT leaves the page and goes nowhere: the network is that slow.
  let held = 0;
  await a.page.route('**/v1/uploads/*', (route) => {
    if (route.request().method() !== 'PUT') return route.continue();
    held++;
  });
  await a.page.getByTestId('file-input').setInputFiles(file.path);
  await eventually(async () => assert.equal(held, 1));
  await a.page.unrouteAll({ behavior: 'ignoreErrors' });
  await reload(a.page, conv.id);
  await pickAgainAndSend(a, conv, 9952, file, seen);
  await finish(a);
});

test("a page reloaded after its PUT reached chatd, before the answer came, takes that upload when the file is picked again: one ticket, charged once", async () => {
  const { conv, a } = await openDirect(spec, 9953, 9954, []);
  const seen = watch(a.page);
  const file = minutes('minutes.txt');
  // The PUT gets through to chatd; its answer never comes back. (Sent
  // from here with the file's bytes: an intercepted request's body does
  // not carry a File.)
  let stored = 0;
  await a.page.route('**/v1/uploads/*', async (route) => {
    const r = route.request();
    if (r.method() !== 'PUT') return route.continue();
    const h = await r.allHeaders();
    const res = await fetch(r.url(), { method: 'PUT', headers: { Authorization: h.authorization, 'Content-Type': h['content-type'] }, body: file.bytes });
    stored = res.status;
  });
  await a.page.getByTestId('file-input').setInputFiles(file.path);
  await eventually(async () => assert.equal(stored, 200));
  await a.page.unrouteAll({ behavior: 'ignoreErrors' });
  await reload(a.page, conv.id);
  await pickAgainAndSend(a, conv, 9954, file, seen);
  await finish(a);
});

test('a page reloaded in the middle of an upload, then removed from the tray, forgets it', async () => {
  const { conv, a } = await openDirect(spec, 9955, 9956, []);
  const file = minutes('plan.txt');
  await a.page.route('**/v1/uploads/*', (route) => {
    if (route.request().method() !== 'PUT') return route.continue();
  });
  await a.page.getByTestId('file-input').setInputFiles(file.path);
  await a.page.getByTestId('tray-item').waitFor();
  await a.page.unrouteAll({ behavior: 'ignoreErrors' });
  await reload(a.page, conv.id);
  await a.page.getByTestId('tray-waiting').waitFor();
  await a.page.getByTestId('tray-waiting-remove').click();
  await trayGone(a.page);
  await reload(a.page, conv.id);
  await trayGone(a.page);
  await finish(a);
});

test("two tabs of the user picking the same file make an upload each, both sent; once the first tab is closed, its upload resumes in another", async () => {
  const { conv, a } = await openDirect(spec, 9957, 9958, []);
  // A small file: the day's bytes take it three times over.
  const file = { path: join(dir, 'agenda.txt'), bytes: Buffer.from('1. minutes\n2. budget\n3. any other business\n'.repeat(40)) };
  writeFileSync(file.path, file.bytes);
  // The first tab's PUT goes nowhere: it is still uploading the file.
  let held = 0;
  await a.page.route('**/v1/uploads/*', (route) => {
    if (route.request().method() !== 'PUT') return route.continue();
    held++;
  });
  const first = watch(a.page);
  await a.page.getByTestId('file-input').setInputFiles(file.path);
  await eventually(async () => assert.equal(held, 1));
  // The same user's second tab, the same browser storage: the same file.
  const tab = async () => {
    const page = await a.context.newPage();
    page.on('pageerror', (e) => a.errors.push(`pageerror: ${e.message}`));
    await page.goto(spec.BASE);
    await online(page, 20000);
    await openConversation(page, conv.id);
    return page;
  };
  // A third tab's upload of another file, the tab closed since: kept, claimed by no page.
  const spare = { path: join(dir, 'spare.txt'), bytes: Buffer.from('spare\n'.repeat(20)) };
  writeFileSync(spare.path, spare.bytes);
  const z = await tab();
  let spareHeld = 0;
  await z.route('**/v1/uploads/*', (route) => {
    if (route.request().method() !== 'PUT') return route.continue();
    spareHeld++;
  });
  await z.getByTestId('file-input').setInputFiles(spare.path);
  await eventually(async () => assert.equal(spareHeld, 1));
  await z.close();
  const b = await tab();
  // The second tab shows the closed tab's upload to resume, not the one the first tab still has.
  await eventually(async () => assert.deepEqual(await b.getByTestId('tray-waiting').locator('.file-name').allTextContents(), ['spare.txt']));
  const second = watch(b);
  await b.getByTestId('file-input').setInputFiles(file.path);
  await trayItem(b, 'done');
  assert.equal(second.tickets, 1, 'the second tab took the upload the first is still PUTting: both would send it, the second refused 409');
  assert.equal(second.puts.length, 1);
  assert.notDeepEqual(second.puts, first.puts, 'both tabs PUT to one upload');
  await b.getByTestId('send').click();
  // The first tab is closed: its upload is resumed, not asked for again, where the file is picked next.
  await a.page.close();
  const c = await tab();
  const third = watch(c);
  await c.getByTestId('file-input').setInputFiles(file.path);
  await trayItem(c, 'done');
  assert.equal(third.tickets, 0, "a closed tab's upload was not resumed: a second ticket, charged again");
  assert.deepEqual(third.puts, first.puts);
  await c.getByTestId('send').click();
  await eventually(async () => {
    const { messages } = await spec.api(9958, 'GET', `/v1/conversations/${conv.id}/messages`);
    assert.equal(messages.length, 2);
    for (const m of messages) assert.equal(m.attachments?.[0]?.sha256, createHash('sha256').update(file.bytes).digest('hex'));
  });
  await finish(a);
});
