// Unit tests of the tray's uploads across a page reload (src/uploads.js
// UploadTickets, src/views/attachments.js createTray): a reload is a new
// Uploader and tray over the same localStorage, the page before it
// abandoned where it stood (a reload runs none of its code). Plain Node
// with stand-ins for localStorage, the DOM and XMLHttpRequest.
// Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as uploads from '../src/uploads.js';
import { createTray } from '../src/views/attachments.js';
import { fakeDocument } from './fakedom.mjs';

const ME = 8;
const CONV = 7;

/** localStorage's interface over a Map. */
function memoryStorage() {
  const m = new Map();
  return {
    get length() {
      return m.size;
    },
    key: (i) => [...m.keys()][i] ?? null,
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
    map: m,
  };
}

/** The file the user picks, and picks again after the reload: a File's fields. */
const minutes = () => ({ name: 'minutes.txt', type: 'text/plain', size: 40000, lastModified: 1765000000000 });

/** The localStorage key of user ME's kept upload of file for conversation cid. */
const keptAt = (cid, f) => `chatd.uploads.${ME}/${JSON.stringify([cid, { name: f.name, size: f.size, lastModified: f.lastModified, type: f.type }])}`;

/**
 * One browser's localStorage as its tabs see it: each tab reads and writes
 * a copy of its own, which the other tabs' writes reach only later
 * (flush), as in browsers that run tabs in processes of their own: one
 * tab's read and then write of a key are not ordered against another's.
 */
function tabbedStorage() {
  const shared = new Map();
  const pending = [];
  const views = [];
  const tab = () => {
    const m = new Map(shared);
    const view = {
      get length() {
        return m.size;
      },
      key: (i) => [...m.keys()][i] ?? null,
      getItem: (k) => (m.has(k) ? m.get(k) : null),
      setItem: (k, v) => {
        m.set(k, String(v));
        pending.push([k, String(v)]);
      },
      removeItem: (k) => {
        m.delete(k);
        pending.push([k, null]);
      },
      map: m,
    };
    views.push(view);
    return view;
  };
  const flush = () => {
    for (const [k, v] of pending.splice(0)) {
      if (v === null) shared.delete(k);
      else shared.set(k, v);
    }
    for (const view of views) {
      view.map.clear();
      for (const [k, v] of shared) view.map.set(k, v);
    }
  };
  return { tab, flush };
}

/**
 * The ticket requests of c that made an upload, charged against the day's
 * bytes: the first with each Idempotency-Key. One asked again with its key
 * (a kept ticket's URL is not kept) is answered that upload, charged
 * nothing.
 */
const uploadsMade = (c) => c.tickets.filter((t, i) => c.tickets.findIndex((x) => x.key === t.key) === i);

const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');

const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

/**
 * chatd as the pages see it: tickets (POST /v1/uploads, each noted with its
 * Idempotency-Key; a key asked again answers its upload, as chatd does),
 * completions and reads of uploads, and the PUTs of the stand-in
 * XMLHttpRequest. Each PUT does what the next of puts says: 'hang' (a
 * third of the bytes go, then the page goes away), 'sent' (every byte
 * went, the answer never comes), or by default chatd's answer, the
 * complete upload. objectStore makes tickets with a completeUrl.
 */
function fakeChatd({ objectStore = false, urlValidMs = 15 * 60000 } = {}) {
  const c = { tickets: [], keys: new Map(), puts: [], completions: [], reads: [], script: [], uploads: new Map(), bytes: [] };
  const ticket = (id) => ({
    uploadId: id,
    url: objectStore ? `https://store.example/${id}` : `/v1/uploads/${id}`,
    method: 'PUT',
    headers: { 'Content-Type': 'text/plain' },
    expiresAt: new Date(Date.now() + urlValidMs).toISOString(),
    ...(objectStore ? { completeUrl: `/v1/uploads/${id}/complete` } : {}),
  });
  const attachment = (id) => ({ id, name: 'minutes.txt', contentType: 'text/plain', size: 40000, ...(c.uploads.get(id)?.sha256 ? { sha256: c.uploads.get(id).sha256 } : {}) });
  c.api = {
    token: 't',
    onUnauthorized() {},
    async request(method, path, body, headers = {}) {
      if (method === 'POST' && path === '/v1/uploads') {
        const key = headers['Idempotency-Key'];
        c.tickets.push({ body, key });
        if (c.stallTickets) return new Promise(() => {});
        if (!c.keys.has(key)) {
          const id = `u${c.tickets.length}`;
          c.keys.set(key, ticket(id));
          c.uploads.set(id, { state: 'pending', stored: false });
        }
        return c.keys.get(key);
      }
      const done = /^\/v1\/uploads\/(u\d+)\/complete$/.exec(path);
      if (method === 'POST' && done) {
        c.completions.push(done[1]);
        const u = c.uploads.get(done[1]);
        if (!u) throw Object.assign(new Error('no such upload'), { status: 404, code: 'not_found' });
        if (!u.stored) throw Object.assign(new Error('nothing under the URL'), { status: 400, code: 'invalid' });
        u.state = 'complete';
        return { uploadId: done[1], state: 'complete', attachment: attachment(done[1]) };
      }
      const read = /^\/v1\/uploads\/(u\d+)$/.exec(path);
      if (method === 'GET' && read) {
        c.reads.push(read[1]);
        const u = c.uploads.get(read[1]);
        if (!u) throw Object.assign(new Error('no such upload'), { status: 404, code: 'not_found' });
        return { uploadId: read[1], state: u.state, ...(u.state === 'complete' ? { attachment: attachment(read[1]) } : {}) };
      }
      throw new Error(`unexpected ${method} ${path}`);
    },
  };
  c.XHR = class {
    constructor() {
      this.upload = {};
    }
    open(method, url) {
      this.url = url;
    }
    setRequestHeader() {}
    getResponseHeader() {
      return null;
    }
    send(file) {
      const what = c.script.shift() ?? 'ok';
      c.puts.push(this.url);
      const id = /(u\d+)$/.exec(this.url)[1];
      // A File's bytes: the upload says which it holds (sha256), as chatd's does.
      if (file instanceof Blob) c.bytes.push(file.arrayBuffer().then(async (b) => (c.uploads.get(id).sha256 = hex(await crypto.subtle.digest('SHA-256', b)))));
      setImmediate(() => this.upload.onprogress?.({ loaded: file.size / 3, total: file.size, lengthComputable: true }));
      if (what === 'hang') return;
      setImmediate(() => {
        const u = c.uploads.get(id);
        u.stored = true;
        if (!objectStore) u.state = 'complete';
        this.upload.onload?.();
        if (what === 'sent') return;
        this.status = 200;
        this.responseText = objectStore ? '' : JSON.stringify({ uploadId: id, state: 'complete', attachment: attachment(id) });
        this.onload();
        this.onloadend();
      });
    }
    abort() {}
  };
  return c;
}

/**
 * The Web Locks of one browser (navigator.locks, exclusive and ifAvailable
 * only) as its tabs see them: tab() is a tab's, whose locks go when it does
 * (gone(): closed, reloaded or crashed), as a browser releases them.
 */
function browserLocks() {
  const held = new Set();
  return () => {
    let gone;
    const death = new Promise((r) => (gone = r));
    const locks = {
      async request(name, opts, cb) {
        assert.equal(opts?.ifAvailable, true, 'a lock waited for');
        if (held.has(name)) return cb(null);
        held.add(name);
        try {
          return await Promise.race([cb({ name, mode: 'exclusive' }), death]);
        } finally {
          held.delete(name);
        }
      },
      async query() {
        return { held: [...held].map((name) => ({ name, mode: 'exclusive' })), pending: [] };
      },
    };
    return { locks, gone };
  };
}

/** A page of user uid: an Uploader keeping its tickets in storage (locks: its tab's navigator.locks), and the composer's tray for conversation cid. */
function page(c, storage, { uid = ME, cid = CONV, locks = null } = {}) {
  const up = new uploads.Uploader(c.api, { userId: uid, storage, locks });
  up.stallMs = 1000; // the abandoned page's PUT gives up soon: node waits for its timer
  const tray = createTray(up, () => cid, () => {});
  return { up, tray, items: () => tray.el.findAll('tray-item'), waiting: () => tray.el.findAll('tray-waiting') };
}

/** Runs fn with the stand-in DOM and c's XMLHttpRequest. */
async function withBrowser(c, fn) {
  const undo = fakeDocument();
  globalThis.XMLHttpRequest = c.XHR;
  try {
    await fn();
  } finally {
    delete globalThis.XMLHttpRequest;
    undo();
  }
}

/** The tray's one item once its upload is status. */
async function itemOnce(p, status) {
  for (let i = 0; i < 50; i++) {
    await settle();
    const [it] = p.items();
    if (it?.dataset.status === status) return it;
  }
  const it = p.items()[0];
  assert.fail(`the tray's item is ${it?.dataset.status} (${it?.find('tray-state').textContent}), not ${status}`);
}

test('a page reloaded in the middle of a PUT PUTs the file picked again to the same ticket, asking for no second one charged again', async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.script.push('hang');
    const before = page(c, storage);
    before.tray.add([minutes()]);
    await settle();
    assert.equal(c.puts.length, 1);
    // The reload: a new page over the same storage; the user picks the file again.
    const after = page(c, storage);
    after.tray.add([minutes()]);
    const it = await itemOnce(after, 'done');
    assert.equal(uploadsMade(c).length, 1, `a second ticket was asked for, charged again against the day's bytes: ${JSON.stringify(c.tickets.map((t) => t.key))}`);
    assert.deepEqual(c.puts, ['/v1/uploads/u1', '/v1/uploads/u1']);
    assert.deepEqual(after.tray.take().map((a) => a.id), ['u1']);
  });
});

test('a page reloaded while its ticket request was unanswered asks again with the same Idempotency-Key, so chatd answers the upload the first made', async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.stallTickets = true;
    page(c, storage).tray.add([minutes()]);
    await settle();
    assert.equal(c.tickets.length, 1);
    c.stallTickets = false;
    const after = page(c, storage);
    after.tray.add([minutes()]);
    await itemOnce(after, 'done');
    assert.equal(c.tickets.length, 2);
    assert.equal(c.tickets[1].key, c.tickets[0].key, 'the ticket was asked for with a new key: a second upload, charged again');
    assert.equal(c.keys.size, 1);
  });
});

test('an object-store upload whose bytes all went before the reload is completed when the file is picked again: no PUT, no ticket again', async () => {
  const c = fakeChatd({ objectStore: true });
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.script.push('sent'); // every byte went; the page went before the store's answer
    page(c, storage).tray.add([minutes()]);
    await settle();
    assert.deepEqual(c.completions, []);
    const after = page(c, storage);
    after.tray.add([minutes()]);
    await itemOnce(after, 'done');
    assert.equal(c.puts.length, 1, `the bytes the store holds were sent again: ${JSON.stringify(c.puts)}`);
    assert.equal(c.tickets.length, 1, 'a second ticket was asked for');
    assert.deepEqual(c.completions, ['u1']);
    assert.deepEqual(after.tray.take().map((a) => a.id), ['u1']);
  });
});

test('an upload complete before the reload, not yet sent in a message, is taken as it is when the file is picked again', async () => {
  for (const objectStore of [false, true]) {
    const c = fakeChatd({ objectStore });
    const storage = memoryStorage();
    await withBrowser(c, async () => {
      const before = page(c, storage);
      before.tray.add([minutes()]);
      await itemOnce(before, 'done');
      const after = page(c, storage);
      after.tray.add([minutes()]);
      await itemOnce(after, 'done');
      assert.equal(c.puts.length, 1, `${objectStore ? 'object store' : 'chatd'}: the file was PUT again`);
      assert.equal(c.tickets.length, 1, `${objectStore ? 'object store' : 'chatd'}: a second ticket was asked for`);
      assert.deepEqual(after.tray.take().map((a) => a.id), ['u1']);
    });
  }
});

test('after a reload the tray shows the unfinished uploads of the conversation, saying to pick the file again; picking it replaces the notice, Remove forgets the upload', async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.script.push('hang', 'hang');
    const other = { name: 'plan.pdf', type: 'application/pdf', size: 900, lastModified: 1765000000001 };
    page(c, storage).tray.add([minutes(), other]);
    await settle();
    const after = page(c, storage);
    after.tray.restore();
    const waiting = after.waiting();
    assert.equal(waiting.length, 2, 'the tray does not show the uploads the reload interrupted');
    assert.equal(after.tray.el.hidden, false);
    assert.match(waiting[0].find('tray-waiting-state').textContent, /pick the file again to resume/i);
    assert.equal(after.tray.busy(), false, 'an upload waiting for its file holds the message back');
    after.tray.add([minutes()]);
    await itemOnce(after, 'done');
    assert.equal(after.waiting().length, 1, 'the file picked again is still shown as waiting');
    after.waiting()[0].find('tray-waiting-remove').dispatch('click');
    assert.equal(after.waiting().length, 0);
    // Removed: picked again after another reload, it is a new upload.
    const again = page(c, storage);
    again.tray.add([other]);
    await itemOnce(again, 'done');
    assert.deepEqual(uploadsMade(c).map((t) => t.body.name), ['minutes.txt', 'plan.pdf', 'plan.pdf']);
    assert.notEqual(uploadsMade(c)[2].key, uploadsMade(c)[1].key);
  });
});

test('an upload sent in a message, removed from the tray, or refused for good is forgotten: the file picked after a reload is a new upload', async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    // Sent in a message.
    const sent = page(c, storage);
    sent.tray.add([minutes()]);
    await itemOnce(sent, 'done');
    sent.tray.take();
    // Removed while uploading.
    c.script.push('hang');
    const removed = page(c, storage);
    removed.tray.add([minutes()]);
    await settle();
    removed.items()[0].find('tray-remove').dispatch('click');
    assert.equal(storage.map.size, 0, `kept: ${[...storage.map.values()]}`);
    const after = page(c, storage);
    after.tray.restore();
    assert.equal(after.waiting().length, 0);
    after.tray.add([minutes()]);
    await itemOnce(after, 'done');
    assert.equal(c.tickets.length, 3);
    assert.equal(new Set(c.tickets.map((t) => t.key)).size, 3);
  });
  // Refused for good: the user left the conversation.
  const refusing = fakeChatd();
  const put = refusing.XHR.prototype.send;
  refusing.XHR.prototype.send = function () {
    this.status = 403;
    this.responseText = JSON.stringify({ error: { code: 'not_member', message: 'not a member of conversation 7' } });
    setImmediate(() => (this.onload(), this.onloadend()));
  };
  const storage2 = memoryStorage();
  await withBrowser(refusing, async () => {
    const p = page(refusing, storage2);
    p.tray.add([minutes()]);
    await itemOnce(p, 'failed');
    assert.equal(storage2.map.size, 0, 'the ticket of a refused upload is kept');
  });
  refusing.XHR.prototype.send = put;
});

test('a kept ticket is its user\'s and its conversation\'s alone, forgotten when someone else signs in, and past the upload\'s lifetime', async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.script.push('hang', 'hang', 'hang');
    page(c, storage).tray.add([minutes()]);
    await settle();
    // Another user at this browser, the same file.
    const them = page(c, storage, { uid: 9 });
    them.tray.restore();
    assert.equal(them.waiting().length, 0, "another user's upload is shown");
    them.tray.add([minutes()]);
    await settle();
    assert.equal(c.tickets.length, 2);
    assert.notEqual(c.tickets[1].key, c.tickets[0].key, "another user's key was used");
    // The same file for another conversation.
    const elsewhere = page(c, storage, { cid: 11 });
    elsewhere.tray.add([minutes()]);
    await settle();
    assert.equal(c.tickets.length, 3);
    assert.equal(c.tickets[2].body.conversationId, 11);
    assert.notEqual(c.tickets[2].key, c.tickets[0].key, "another conversation's upload was used");
    // User 9 signs in here: what 8 left goes.
    uploads.UploadTickets.forgetOthers(9, storage);
    assert.deepEqual([...storage.map.keys()].map((k) => k.split('/')[0]), ['chatd.uploads.9']);
    assert.equal(new uploads.UploadTickets(ME, storage).list().length, 0);
    // Past the upload's lifetime (upload_ttl), a kept ticket goes.
    const kept = new uploads.UploadTickets(9, storage, () => Date.now() + uploads.TICKET_KEEP_MS + 1000);
    assert.equal(kept.list().length, 0, 'a ticket past upload_ttl is kept');
    assert.equal(storage.map.size, 0);
  });
});

test('a kept ticket whose upload chatd deleted since (404) is replaced by a new ticket with a new key when the file is picked again', async () => {
  // Tickets whose URL is past by the time the page comes back.
  const c = fakeChatd({ urlValidMs: 5000 });
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.script.push('sent'); // the page went before chatd's answer
    page(c, storage).tray.add([minutes()]);
    await settle();
    // ...and came back after upload_ttl: the upload is deleted, its key with it.
    c.uploads.clear();
    c.keys.clear();
    const after = page(c, storage);
    after.tray.add([minutes()]);
    await itemOnce(after, 'done');
    assert.deepEqual(c.reads, ['u1'], 'the kept upload was not asked for first');
    assert.equal(c.tickets.length, 2);
    assert.notEqual(c.tickets[1].key, c.tickets[0].key);
    assert.deepEqual(after.tray.take().map((a) => a.id), ['u2']);
  });
});

test('switching conversations keeps the uploads the tray stops; coming back shows them, and picking the file resumes', async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  await withBrowser(c, async () => {
    c.script.push('hang');
    let cid = CONV;
    const up = new uploads.Uploader(c.api, { userId: ME, storage });
    up.stallMs = 1000;
    const tray = createTray(up, () => cid, () => {});
    tray.add([minutes()]);
    await settle();
    cid = 11;
    tray.clear();
    tray.restore();
    assert.equal(tray.el.findAll('tray-waiting').length, 0, "another conversation's upload is shown");
    cid = CONV;
    tray.clear();
    tray.restore();
    assert.equal(tray.el.findAll('tray-waiting').length, 1);
    tray.add([minutes()]);
    for (let i = 0; i < 50 && tray.el.findAll('tray-item')[0]?.dataset.status !== 'done'; i++) await settle();
    assert.equal(tray.el.findAll('tray-item')[0]?.dataset.status, 'done');
    assert.equal(uploadsMade(c).length, 1);
  });
});

test("two tabs of the user picking the same file for the conversation make an upload each: neither PUTs to, completes nor sends the other's; once a tab is gone its upload resumes", async () => {
  for (const first of ['hang', 'ok']) {
    const c = fakeChatd();
    const storage = memoryStorage();
    const tab = browserLocks();
    await withBrowser(c, async () => {
      c.script.push(first);
      const one = tab();
      const a = page(c, storage, { locks: one.locks });
      a.tray.add([minutes()]);
      if (first === 'ok') await itemOnce(a, 'done');
      else await settle();
      assert.equal(c.puts.length, 1);
      // The same user's other tab, the same file, while the first still has it.
      const b = page(c, storage, { locks: tab().locks });
      b.tray.add([minutes()]);
      await itemOnce(b, 'done');
      assert.equal(c.tickets.length, 2, `first tab ${first}: the second tab took the first's upload (PUTs ${JSON.stringify(c.puts)}): both would send it, chatd refuses the second 409`);
      assert.notEqual(c.tickets[1].key, c.tickets[0].key);
      assert.deepEqual(b.tray.take().map((x) => x.id), ['u2']);
      assert.equal(new uploads.UploadTickets(ME, storage).list().length, 1, "the second tab's send forgot the first's upload");
      // The first tab goes (reloaded, closed, crashed): the file picked again resumes its upload.
      one.gone();
      await settle();
      const again = page(c, storage, { locks: tab().locks });
      again.tray.add([minutes()]);
      await itemOnce(again, 'done');
      assert.equal(uploadsMade(c).length, 2, `first tab ${first}: the upload of the tab that went was not resumed`);
      assert.deepEqual(again.tray.take().map((x) => x.id), ['u1']);
    });
  }
});

test('a kept entry this page cannot use (corrupted, or of another version: a ticket without its URL or expiry) is no ticket: the file picked again uploads and completes', async () => {
  const file = minutes();
  const tickets = ['u1', { uploadId: 'u1' }, { uploadId: 'u1', url: '/v1/uploads/u1', method: 'PUT' }, { uploadId: 'u1', url: '/v1/uploads/u1', expiresAt: 'soon' }];
  for (const ticket of tickets) {
    const c = fakeChatd();
    const storage = memoryStorage();
    storage.setItem(keptAt(CONV, file), JSON.stringify({ cid: CONV, file, ticket, ticketKey: null, at: Date.now() }));
    storage.setItem(`chatd.uploads.${ME}/x`, JSON.stringify({ cid: CONV, file: 'plan.pdf', ticketKey: 'k2', at: Date.now() }));
    storage.setItem(`chatd.uploads.${ME}/y`, '{"cid":');
    // As the first version kept them: a list under the user's key.
    storage.setItem(`chatd.uploads.${ME}`, JSON.stringify([{ cid: CONV, file, ticket: { uploadId: 'u5', url: '/v1/uploads/u5', expiresAt: new Date(Date.now() + 60000).toISOString() }, ticketKey: 'k5', at: Date.now() }]));
    await withBrowser(c, async () => {
      const p = page(c, storage);
      p.tray.restore();
      assert.equal(p.waiting().length, 0, `kept ${JSON.stringify(ticket)}: an entry that is no upload is shown`);
      p.tray.add([minutes()]);
      await itemOnce(p, 'done');
      assert.equal(c.tickets.length, 1, `kept ${JSON.stringify(ticket)}: no ticket was asked for`);
      assert.deepEqual(c.puts, ['/v1/uploads/u1']);
    });
  }
  // A ticket's key kept without its ticket is asked again with that key.
  const c = fakeChatd();
  const storage = memoryStorage();
  storage.setItem(keptAt(CONV, file), JSON.stringify({ cid: CONV, file, ticket: { uploadId: 'u9' }, ticketKey: 'k1', at: Date.now() }));
  await withBrowser(c, async () => {
    const p = page(c, storage);
    p.tray.add([minutes()]);
    await itemOnce(p, 'done');
    assert.deepEqual(c.tickets.map((t) => t.key), ['k1']);
  });
});

test("two tabs of the user keeping uploads at the same moment keep both: one tab's write does not undo the other's", async () => {
  const c = fakeChatd();
  const browser = tabbedStorage();
  await withBrowser(c, async () => {
    c.script.push('hang', 'hang');
    const plan = { name: 'plan.pdf', type: 'application/pdf', size: 900, lastModified: 1765000000001 };
    page(c, browser.tab()).tray.add([minutes()]);
    page(c, browser.tab()).tray.add([plan]);
    await settle();
    browser.flush();
    // Both tabs reloaded (or the browser restarted): both uploads are there.
    const after = page(c, browser.tab());
    after.tray.restore();
    assert.equal(after.waiting().length, 2, "a tab's upload was lost to the other tab's write");
    after.tray.add([minutes(), plan]);
    for (let i = 0; i < 50 && !after.items().every((it) => it.dataset.status === 'done'); i++) await settle();
    assert.deepEqual(
      after.items().map((it) => it.dataset.status),
      ['done', 'done'],
    );
    assert.equal(uploadsMade(c).length, 2, 'an upload was asked for again, charged again');
  });
});

test('a file picked again with the name, size, type and modification time of a kept upload whose bytes all went, but other bytes (edited within the second), is uploaded anew: the kept upload is not sent for it', async () => {
  const at = 1765000000000;
  const file = (b) => new File([b.repeat(40000)], 'minutes.txt', { type: 'text/plain', lastModified: at });
  for (const objectStore of [false, true]) {
    for (const [picked, tickets, sent] of [
      ['b', 2, 'u2'],
      ['a', 1, 'u1'],
    ]) {
      const c = fakeChatd({ objectStore });
      const storage = memoryStorage();
      await withBrowser(c, async () => {
        c.script.push('sent'); // every byte went; the page went before the answer
        page(c, storage).tray.add([file('a')]);
        await settle();
        await Promise.all(c.bytes);
        const after = page(c, storage);
        after.tray.add([file(picked)]);
        await itemOnce(after, 'done');
        const what = `${objectStore ? 'object store' : 'chatd'}, ${picked === 'a' ? 'the same bytes' : 'other bytes'}`;
        assert.equal(c.tickets.length, tickets, `${what}: ${tickets === 2 ? 'the file was taken for the kept upload, whose bytes are not its own' : 'a second ticket was asked for'}`);
        assert.deepEqual(after.tray.take().map((a) => a.id), [sent], what);
      });
    }
  }
});

test("a tab does not show, nor forget, an upload another live tab of the user holds: it is that tab's, going on or waiting to be sent there", async () => {
  const c = fakeChatd();
  const storage = memoryStorage();
  const tab = browserLocks();
  await withBrowser(c, async () => {
    c.script.push('hang');
    const a = page(c, storage, { locks: tab().locks });
    a.tray.add([minutes()]);
    await settle();
    assert.equal(c.puts.length, 1);
    // The user's other tab opens the conversation while the first still uploads the file.
    const b = page(c, storage, { locks: tab().locks });
    await b.tray.restore();
    assert.equal(b.waiting().length, 0, "the other tab's upload is shown as not sent, to pick again");
    // A tab that showed a kept upload before another tab took it up (its file picked there).
    const gone = tab();
    const d = page(c, storage, { locks: gone.locks });
    const e = page(c, storage, { locks: tab().locks });
    a.tray.clear(); // a stops (another conversation): the upload is kept, claimed by no one
    await settle();
    await e.tray.restore();
    assert.equal(e.waiting().length, 1);
    c.script.push('hang');
    d.tray.add([minutes()]);
    await settle();
    e.waiting()[0].find('tray-waiting-remove').dispatch('click');
    await settle();
    assert.equal(e.waiting().length, 0);
    assert.notEqual(storage.getItem(keptAt(CONV, minutes())), null, "a tab's Forget deleted the upload another tab goes on with");
    // That tab gone, the upload is shown again, and Forget forgets it.
    gone.gone();
    await settle();
    const f = page(c, storage, { locks: tab().locks });
    await f.tray.restore();
    assert.equal(f.waiting().length, 1);
    f.waiting()[0].find('tray-waiting-remove').dispatch('click');
    await settle();
    assert.equal(storage.getItem(keptAt(CONV, minutes())), null, 'Forget kept the upload no tab holds');
  });
});

test("a kept ticket's upload URL (an object store's presigned one: leave to write into the bucket) is not kept in the browser's storage while its key asks for it again: the file picked after a reload gets it again with the same key, the same upload charged once", async () => {
  for (const objectStore of [false, true]) {
    const c = fakeChatd({ objectStore });
    const storage = memoryStorage();
    await withBrowser(c, async () => {
      c.script.push('hang');
      page(c, storage).tray.add([minutes()]);
      await settle();
      assert.equal(c.puts.length, 1);
      const kept = JSON.parse(storage.getItem(keptAt(CONV, minutes())));
      assert.equal(kept.ticket?.uploadId, 'u1');
      for (const f of ['url', 'method', 'headers']) assert.equal(kept.ticket[f], undefined, `${objectStore ? 'object store' : 'chatd'}: the ticket's ${f} is kept: ${JSON.stringify(kept.ticket)}`);
      const after = page(c, storage);
      after.tray.add([minutes()]);
      await itemOnce(after, 'done');
      assert.deepEqual(c.tickets.map((t) => t.key), [kept.ticketKey, kept.ticketKey], 'the ticket was not asked again with its key');
      assert.equal(c.keys.size, 1, 'a second upload was made, charged again');
      assert.deepEqual(c.puts, [c.keys.get(kept.ticketKey).url, c.keys.get(kept.ticketKey).url]);
      assert.deepEqual(after.tray.take().map((a) => a.id), ['u1']);
    });
  }
});

test('a ticket kept without a key to ask for it again keeps its URL until its expiresAt only', () => {
  const file = minutes();
  for (const [validMs, urlKept] of [
    [60000, true],
    [-1000, false],
  ]) {
    const storage = memoryStorage();
    const ticket = { uploadId: 'u1', url: 'https://store.example/u1?sig=x', method: 'PUT', headers: { 'Content-Type': 'text/plain' }, expiresAt: new Date(Date.now() + validMs).toISOString(), completeUrl: '/v1/uploads/u1/complete', sent: true };
    storage.setItem(keptAt(CONV, file), JSON.stringify({ cid: CONV, file, ticket, ticketKey: null, at: Date.now() }));
    const [e] = new uploads.UploadTickets(ME, storage).list();
    assert.equal(e?.ticket?.uploadId, 'u1', 'the upload was forgotten');
    assert.equal(e.ticket.completeUrl, '/v1/uploads/u1/complete');
    assert.equal(e.ticket.sent, true);
    const stored = JSON.parse(storage.getItem(keptAt(CONV, file))).ticket;
    assert.equal(stored.url !== undefined, urlKept, `valid for ${validMs} ms: the URL ${urlKept ? 'went' : 'stayed in storage'}`);
    assert.equal(e.ticket.url !== undefined, urlKept);
  }
});

test("signing out forgets the user's kept uploads, those another tab of the user writes back at that moment too: after the sign-out no page of the user's signed-out session keeps one", async () => {
  const c = fakeChatd();
  const browser = tabbedStorage();
  await withBrowser(c, async () => {
    c.script.push('hang', 'hang');
    const plan = { name: 'plan.pdf', type: 'application/pdf', size: 900, lastModified: 1765000000001 };
    // The user's other tab, uploading.
    const other = page(c, browser.tab());
    other.tray.add([minutes()]);
    await settle();
    browser.flush();
    // Signed out in this tab; the other tab, not yet told (its storage
    // event still to come), writes where its uploads stand.
    await new Promise((r) => setTimeout(r, 5));
    const here = browser.tab();
    uploads.UploadTickets.clearUser(ME, here);
    other.tray.add([plan]);
    await settle();
    browser.flush();
    // The user (or the next person as the same user) signs in again.
    await new Promise((r) => setTimeout(r, 5));
    const after = page(c, browser.tab());
    assert.deepEqual(
      after.up.tickets.list().map((e) => e.file.name),
      [],
      "an upload of the signed-out session's other tab stayed in the browser",
    );
    await after.tray.restore();
    assert.equal(after.waiting().length, 0);
    // What this signed-in page keeps, it keeps.
    c.script.push('hang');
    after.tray.add([minutes()]);
    await settle();
    browser.flush();
    assert.deepEqual(page(c, browser.tab()).up.tickets.list().map((e) => e.file.name), ['minutes.txt']);
  });
});

test('a session of the user begun in the same millisecond as their sign-out here, or on a clock set back since, keeps its uploads: only the sessions the sign-out ended lose theirs', () => {
  const realNow = Date.now;
  const signedOutAt = 1765000100000;
  try {
    for (const laterMs of [0, -1000]) {
      const storage = memoryStorage();
      Date.now = () => signedOutAt;
      const before = new uploads.UploadTickets(ME, storage);
      uploads.UploadTickets.clearUser(ME, storage);
      // Signed in again at once: the same millisecond, or the clock set back.
      Date.now = () => signedOutAt + laterMs;
      const after = new uploads.UploadTickets(ME, storage);
      after.keep(CONV, minutes(), null, '00000000-0000-4000-8000-000000000001');
      // The signed-out session's page, not yet told, writes back.
      before.keep(CONV, { ...minutes(), name: 'plan.pdf' }, null, '00000000-0000-4000-8000-000000000002');
      assert.deepEqual(
        new uploads.UploadTickets(ME, storage).list().map((e) => e.file.name),
        ['minutes.txt'],
        `signed in again ${laterMs} ms after the sign-out: what the new session keeps is not kept, or the signed-out session's is`,
      );
    }
  } finally {
    Date.now = realNow;
  }
});
