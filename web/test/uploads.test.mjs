// Unit tests of src/uploads.js: the Uploader's cancel and the BlobCache's
// blob: URLs. Plain Node with stand-ins for the browser's XMLHttpRequest
// and fetch. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlobCache, Uploader, shownAsPicture } from '../src/uploads.js';
import { fakeDocument } from './fakedom.mjs';

/** An Api whose requests wait until the test answers them. */
function pendingApi() {
  const calls = [];
  return {
    token: 't',
    calls,
    onUnauthorized() {},
    request(method, path, body) {
      return new Promise((resolve, reject) => calls.push({ method, path, body, resolve, reject }));
    },
  };
}

/**
 * An Api for ticket requests (POST /v1/uploads): each one's body and
 * Idempotency-Key go to onTicket, which throws to fail the request or
 * answers the id of the upload its ticket (valid 15 minutes) is for.
 * A read of an upload (GET /v1/uploads/{id}) is onGet's answer, given the
 * id.
 */
function ticketApi(onTicket, onGet) {
  return {
    token: 't',
    onUnauthorized() {},
    async request(method, path, body, headers = {}) {
      if (method === 'GET' && onGet && path.startsWith('/v1/uploads/')) return onGet(path.slice('/v1/uploads/'.length));
      assert.equal(path, '/v1/uploads');
      const id = onTicket(body, headers['Idempotency-Key']);
      const expiresAt = new Date(Date.now() + 15 * 60000).toISOString();
      return { uploadId: id, url: `/v1/uploads/${id}`, method: 'PUT', expiresAt };
    },
  };
}

/**
 * An Uploader of api, and the first try of its upload of a.txt to
 * conversation 7, which must fail as failed says (a network error unless
 * told). The uploader, file and the try's handle are the Retry's.
 */
async function failedFirstTry(api, failed = (e) => e.code === 'network') {
  const up = new Uploader(api);
  const file = { name: 'a.txt', type: 'text/plain', size: 3 };
  const handle = {};
  await assert.rejects(up.upload(7, file, () => {}, handle), failed);
  return { up, file, handle };
}

/** The handle the tray's Retry gives an upload: the ticket and key its try before left. */
const retryHandle = (handle) => ({ ticket: handle.ticket, ticketKey: handle.ticketKey });

/** A stand-in XMLHttpRequest whose every PUT completes upload id. */
function completingXHR(id) {
  return class {
    constructor() {
      this.upload = {};
    }
    open() {}
    setRequestHeader() {}
    send() {
      this.status = 200;
      this.responseText = JSON.stringify({ state: 'complete', attachment: { id } });
      setTimeout(() => (this.onload(), this.onloadend()), 0);
    }
    abort() {}
  };
}

test('an upload removed from the tray before its ticket came sends no bytes and completes nothing', async () => {
  const xhrs = [];
  globalThis.XMLHttpRequest = class {
    constructor() {
      xhrs.push(this);
      this.upload = {};
    }
    open() {}
    setRequestHeader() {}
    send() {
      this.status = 200;
      this.responseText = JSON.stringify({ attachment: { id: 'u1' } });
      setTimeout(() => this.onload(), 0);
    }
    abort() {
      setTimeout(() => this.onabort(), 0);
    }
  };
  try {
    const api = pendingApi();
    const handle = {};
    const done = new Uploader(api).upload(7, { name: 'a.txt', type: 'text/plain', size: 3 }, () => {}, handle);
    assert.equal(api.calls.length, 1, 'the ticket is asked for');
    handle.abort?.(); // what the tray's remove does
    api.calls[0].resolve({ uploadId: 'u1', url: '/v1/uploads/u1', method: 'PUT' });
    await assert.rejects(done, (e) => e.code === 'aborted');
    assert.equal(xhrs.length, 0, 'the bytes of a removed upload were sent');
    assert.equal(api.calls.length, 1, 'a removed upload was completed');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('signing out revokes every blob: URL the cache made, and one still downloading when it lands', async () => {
  const realFetch = globalThis.fetch;
  const made = new Set();
  const realCreate = URL.createObjectURL;
  const realRevoke = URL.revokeObjectURL;
  URL.createObjectURL = (b) => {
    const u = realCreate(b);
    made.add(u);
    return u;
  };
  URL.revokeObjectURL = (u) => {
    made.delete(u);
    realRevoke(u);
  };
  let release;
  const late = new Promise((r) => (release = r));
  globalThis.fetch = async (path) => {
    if (path.endsWith('/late')) await late;
    return new Response(new Blob(['x']), { status: 200 });
  };
  try {
    const cache = new BlobCache({ token: 't' });
    await cache.url('a');
    await cache.url('b', true);
    const pending = cache.url('late');
    assert.equal(made.size, 2);
    cache.clear();
    await new Promise((r) => setTimeout(r, 0)); // the revokes run on the settled downloads
    assert.equal(made.size, 0, 'blob: URLs of the signed-out user are still alive');
    release();
    await pending.catch(() => {});
    assert.equal(made.size, 0, 'a download that landed after the sign-out left its blob: URL alive');
  } finally {
    globalThis.fetch = realFetch;
    URL.createObjectURL = realCreate;
    URL.revokeObjectURL = realRevoke;
  }
});

test('an iPhone HEIC photo, which chatd does not thumbnail, is a file to download, not a broken picture', () => {
  const heic = { contentType: 'image/heic', name: 'IMG_0001.HEIC', size: 2_000_000 };
  assert.equal(shownAsPicture(heic), false);
  assert.equal(shownAsPicture({ ...heic, contentType: 'image/heif' }), false);
  assert.equal(shownAsPicture({ contentType: 'image/jpeg' }), true, 'a JPEG whose thumbnail is not made yet');
  assert.equal(shownAsPicture({ contentType: 'image/avif' }), true);
  assert.equal(shownAsPicture({ ...heic, thumbnail: { width: 320, height: 240 } }), true);
  assert.equal(shownAsPicture({ contentType: 'application/pdf' }), false);
});

test('an avatar upload asks for a ticket with purpose avatar and no conversation', async () => {
  const api = pendingApi();
  const handle = {};
  const done = new Uploader(api).uploadAvatar({ name: 'me.png', type: 'image/png', size: 3 }, () => {}, handle);
  assert.equal(api.calls.length, 1);
  assert.deepEqual(api.calls[0].body, { purpose: 'avatar', name: 'me.png', contentType: 'image/png', size: 3 });
  handle.abort();
  api.calls[0].resolve({ uploadId: 'u1', url: '/v1/uploads/u1', method: 'PUT' });
  await assert.rejects(done, (e) => e.code === 'aborted');
});

test('an avatar chatd keeps is told from an https address by its path', async () => {
  const { keptAvatar } = await import('../src/views/format.js');
  assert.equal(keptAvatar('/v1/attachments/ofbjcmujwrisdvlx7lig5xzoiu'), 'ofbjcmujwrisdvlx7lig5xzoiu');
  assert.equal(keptAvatar('https://img.example/a.png'), null);
  assert.equal(keptAvatar('/v1/attachments/ofbjcmujwrisdvlx7lig5xzoiu/thumbnail'), null);
  assert.equal(keptAvatar(null), null);
});

/** Runs what a render set going (fetches and their fallbacks). */
const settle = () => new Promise((r) => setTimeout(r, 0));

test('an avatar that is gone or has no thumbnail is asked for once, not again at every render', async () => {
  const { userAvatar, useBlobs } = await import('../src/views/format.js');
  const undo = fakeDocument();
  const realFetch = globalThis.fetch;
  const asked = [];
  const released = 'aaaaaaaaaaaaaaaaaaaaaaaaaa';
  const noThumb = 'bbbbbbbbbbbbbbbbbbbbbbbbbb';
  globalThis.fetch = async (path) => {
    asked.push(path);
    if (path.includes(released)) return Response.json({ error: { code: 'gone', message: 'replaced' } }, { status: 410 });
    if (path.endsWith('/thumbnail')) return Response.json({ error: { code: 'not_found', message: 'no thumbnail' } }, { status: 404 });
    return new Response(new Blob(['png']), { status: 200 });
  };
  try {
    useBlobs(new BlobCache({ token: 't' }));
    // The inbox is built again at every event: the same avatars each time.
    const shown = [];
    for (let i = 0; i < 5; i++) {
      shown.push(userAvatar('AB', 2, '', false, `/v1/attachments/${released}`), userAvatar('CD', 3, '', false, `/v1/attachments/${noThumb}`));
      await settle();
    }
    assert.equal(asked.filter((p) => p.includes(released)).length, 1, `a released avatar was asked for again: ${asked}`);
    assert.equal(asked.filter((p) => p.includes(noThumb)).length, 2, `an avatar without a thumbnail was asked for again: ${asked}`);
    for (let i = 0; i < shown.length; i += 2) {
      assert.equal(shown[i].children.filter((c) => c.tag === 'img').length, 0, 'a released avatar left a broken picture');
      assert.equal(shown[i + 1].children.find((c) => c.tag === 'img')?.src?.startsWith('blob:'), true, 'the picture is not shown');
    }
  } finally {
    useBlobs(null);
    globalThis.fetch = realFetch;
    undo();
  }
});

test('a person whose avatar was released is asked for again once, and shown with their new one', async () => {
  const { personAvatar, useBlobs, usePeople } = await import('../src/views/format.js');
  const { People } = await import('../src/store/people.js');
  const undo = fakeDocument();
  const realFetch = globalThis.fetch;
  const old = 'cccccccccccccccccccccccccc';
  const now = 'dddddddddddddddddddddddddd';
  globalThis.fetch = async (path) =>
    path.includes(old) ? Response.json({ error: { code: 'gone', message: 'replaced' } }, { status: 410 }) : new Response(new Blob(['png']), { status: 200 });
  const asked = [];
  const api = {
    token: 't',
    // What chatd holds now: user 2 replaced the avatar this page still has
    // (a member of a large group gets no profile.updated).
    async users(ids) {
      asked.push(ids);
      return { etag: '"e"', users: ids.map((id) => ({ id, displayName: 'Bo', avatar: `/v1/attachments/${now}`, about: '' })) };
    },
  };
  try {
    const people = new People(api, 1);
    people.profiles.set(2, { id: 2, displayName: 'Bo', avatar: `/v1/attachments/${old}`, about: '' });
    usePeople(people);
    useBlobs(new BlobCache(api));
    for (let i = 0; i < 5; i++) {
      personAvatar(2);
      await new Promise((r) => setTimeout(r, 30)); // the fetch, then the batch's 20 ms
    }
    assert.deepEqual(asked, [[2]], 'the profile of a released avatar was not asked for again exactly once');
    assert.equal(people.avatar(2), `/v1/attachments/${now}`);
    const el = personAvatar(2);
    await settle();
    assert.equal(el.children.find((c) => c.tag === 'img')?.src?.startsWith('blob:'), true, 'the new avatar is not shown');
  } finally {
    usePeople(null);
    useBlobs(null);
    globalThis.fetch = realFetch;
    undo();
  }
});

test('an upload whose bytes stop moving (a dead connection) fails, so the tray offers Retry, instead of hanging at its percentage', async () => {
  const xhrs = [];
  globalThis.XMLHttpRequest = class {
    constructor() {
      xhrs.push(this);
      this.upload = {};
      this.aborted = false;
    }
    open() {}
    setRequestHeader() {}
    send() {
      // A third of the bytes go out, then nothing more: no error, no answer.
      setTimeout(() => this.upload.onprogress?.({ loaded: 100, total: 300, lengthComputable: true }), 5);
    }
    abort() {
      this.aborted = true;
      setTimeout(() => this.onabort?.(), 0);
    }
  };
  try {
    const api = pendingApi();
    const up = new Uploader(api);
    up.stallMs = 100;
    const done = up.upload(7, { name: 'a.bin', type: 'application/octet-stream', size: 300 }, () => {}, {});
    api.calls[0].resolve({ uploadId: 'u1', url: '/v1/uploads/u1', method: 'PUT' });
    let timer;
    const err = await Promise.race([done.then(() => null, (e) => e), new Promise((r) => (timer = setTimeout(() => r('still uploading after 3 s'), 3000)))]);
    clearTimeout(timer);
    assert.equal(err?.code, 'network', `failed as a network error, which the tray offers to retry: ${err}`);
    assert.equal(xhrs[0].aborted, true, 'the stalled request is abandoned');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('an upload retried after its PUT was cut off PUTs to the same ticket, asking for no second one', async () => {
  const opened = [];
  let fail = true;
  globalThis.XMLHttpRequest = class {
    constructor() {
      this.upload = {};
    }
    open(method, url) {
      opened.push(url);
    }
    setRequestHeader() {}
    send() {
      // The first PUT got through, but its answer was lost.
      if (fail) {
        setTimeout(() => (this.onerror(), this.onloadend()), 0);
        return;
      }
      this.status = 200;
      this.responseText = JSON.stringify({ state: 'complete', attachment: { id: 'u1' } });
      setTimeout(() => (this.onload(), this.onloadend()), 0);
    }
    abort() {}
  };
  const tickets = [];
  const api = ticketApi(
    (body) => {
      tickets.push(body);
      return `u${tickets.length}`;
    },
    // The upload whose URL expired never got its bytes.
    (id) => ({ uploadId: id, state: 'pending' }),
  );
  try {
    let { up, file, handle } = await failedFirstTry(api);
    // What the tray's Retry does.
    fail = false;
    handle = { ticket: handle.ticket };
    const a = await up.upload(7, file, () => {}, handle);
    assert.equal(a.id, 'u1');
    assert.equal(tickets.length, 1, 'the retry asked for a second ticket, charged again');
    assert.deepEqual(opened, ['/v1/uploads/u1', '/v1/uploads/u1']);

    // A ticket the server refused (its upload deleted) or let expire is not reused.
    fail = true;
    handle = {};
    globalThis.XMLHttpRequest.prototype.send = function () {
      this.status = 410;
      this.responseText = JSON.stringify({ error: { code: 'gone', message: 'expired' } });
      setTimeout(() => (this.onload(), this.onloadend()), 0);
    };
    await assert.rejects(up.upload(7, file, () => {}, handle), (e) => e.code === 'gone');
    assert.equal(handle.ticket, null, 'a gone ticket was kept for the retry');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('a ticket request asked again after it failed carries the same Idempotency-Key; another file or a new ticket a new one', async () => {
  globalThis.XMLHttpRequest = completingXHR('u1');
  const keys = [];
  let lose = true;
  const api = ticketApi(
    (_, key) => {
      keys.push(key);
      // The first answer is lost on the way back: chatd made the upload.
      if (lose) throw Object.assign(new Error('network error'), { status: 0, code: 'network' });
      return 'u1';
    },
    // The expiring ticket's upload never got its bytes.
    (id) => ({ uploadId: id, state: 'pending' }),
  );
  try {
    let { up, file, handle } = await failedFirstTry(api);
    // What the tray's Retry does.
    lose = false;
    handle = retryHandle(handle);
    assert.equal((await up.upload(7, file, () => {}, handle)).id, 'u1');
    assert.equal(keys.length, 2);
    assert.match(keys[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'the ticket request carries no key');
    assert.equal(keys[1], keys[0], 'the retried ticket request has another key: a second upload, charged again');

    // Another file is another key.
    await up.upload(7, { name: 'b.txt', type: 'text/plain', size: 4 }, () => {}, {});
    assert.notEqual(keys[2], keys[0], 'another file reused the key');
    // A ticket about to expire is replaced with a new key (the old one is spent).
    const old = { ticket: { uploadId: 'u1', url: '/v1/uploads/u1', expiresAt: new Date(Date.now() + 1000).toISOString() }, ticketKey: keys[0] };
    await up.upload(7, file, () => {}, old);
    assert.equal(keys.length, 4);
    assert.notEqual(keys[3], keys[0], 'a new ticket for an expiring one reused the spent key');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('a ticket request refused 410 gone (its key spent) is retried with a new Idempotency-Key', async () => {
  globalThis.XMLHttpRequest = completingXHR('u2');
  const keys = [];
  const spent = new Set();
  const api = ticketApi((_, key) => {
    keys.push(key);
    // The key's first answer was lost, and its URL expired since.
    if (keys.length === 1) {
      spent.add(key);
      throw Object.assign(new Error('network error'), { status: 0, code: 'network' });
    }
    if (spent.has(key)) throw Object.assign(new Error('the URL expired'), { status: 410, code: 'gone' });
    return 'u2';
  });
  try {
    let { up, file, handle } = await failedFirstTry(api);
    handle = retryHandle(handle);
    await assert.rejects(up.upload(7, file, () => {}, handle), (e) => e.code === 'gone');
    // The tray's Retry after the 410.
    handle = retryHandle(handle);
    assert.equal((await up.upload(7, file, () => {}, handle)).id, 'u2', 'the spent key was sent again: 410 for ever');
    assert.equal(keys[1], keys[0]);
    assert.notEqual(keys[2], keys[0]);
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

/**
 * A stand-in XMLHttpRequest whose PUTs are answered, in turn, by answers:
 * 'lost' (the PUT got through, its answer cut off on the way back), or an
 * HTTP status with chatd's JSON body. Every URL opened goes to opened.
 */
function scriptedXHR(answers, opened) {
  return class {
    constructor() {
      this.upload = {};
    }
    open(method, url) {
      opened.push(url);
    }
    setRequestHeader() {}
    getResponseHeader() {
      return null;
    }
    send() {
      const [status, body] = answers.shift();
      if (status === 'lost') {
        setTimeout(() => (this.onerror(), this.onloadend()), 0);
        return;
      }
      this.status = status;
      this.responseText = JSON.stringify(body);
      setTimeout(() => (this.onload(), this.onloadend()), 0);
    }
    abort() {}
  };
}

const expired410 = [410, { error: { code: 'gone', message: 'the URL of upload u1 expired at 2026-12-07T09:00:00Z; the upload is complete (GET it)' } }];

test('an upload whose PUT got through, its answer lost, and whose Retry is answered 410 (its URL expired) is the upload chatd holds, not a second one', async () => {
  const opened = [];
  globalThis.XMLHttpRequest = scriptedXHR([['lost'], expired410], opened);
  const gets = [];
  const tickets = [];
  const attachment = { id: 'u1', name: 'a.txt', contentType: 'text/plain', size: 3, sha256: 'ab' };
  const api = ticketApi(
    () => (tickets.push(1), `u${tickets.length}`),
    (id) => (gets.push(id), { uploadId: id, state: 'complete', attachment }),
  );
  try {
    let { up, file, handle } = await failedFirstTry(api);
    // The tray's Retry, its ticket's URL expired on chatd meanwhile.
    handle = retryHandle(handle);
    let progress = 0;
    const a = await up.upload(7, file, (sent, total) => (progress = sent / total), handle);
    assert.deepEqual(a, attachment, 'the retry did not end on the upload chatd holds');
    assert.equal(progress, 1);
    assert.deepEqual(gets, ['u1']);
    assert.equal(tickets.length, 1, 'a second ticket was asked for: the file uploaded and charged again');
    assert.deepEqual(opened, ['/v1/uploads/u1', '/v1/uploads/u1']);
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('an upload whose PUT got through, its answer lost, retried as its ticket is about to expire, is read before a new ticket is asked for', async () => {
  const opened = [];
  globalThis.XMLHttpRequest = scriptedXHR([], opened);
  const tickets = [];
  const attachment = { id: 'u1', name: 'p.png', contentType: 'image/png', size: 3, sha256: 'ab' };
  // Declared a JPEG, the bytes were a PNG: chatd serves what they are.
  const api = ticketApi(
    () => (tickets.push(1), 'u2'),
    (id) => ({ uploadId: id, state: 'complete', attachment }),
  );
  try {
    const up = new Uploader(api);
    const file = { name: 'p.jpg', type: 'image/jpeg', size: 3 };
    const handle = { ticket: { uploadId: 'u1', url: '/v1/uploads/u1', expiresAt: new Date(Date.now() + 1000).toISOString() }, ticketKey: 'k' };
    assert.deepEqual(await up.upload(7, file, () => {}, handle), attachment);
    assert.equal(tickets.length, 0, 'a new ticket was asked for: the file uploaded and charged again');
    assert.deepEqual(opened, [], 'the file was sent again');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('an upload answered 410 whose bytes never arrived (still pending) fails saying the link expired, and its Retry uploads it with a new ticket', async () => {
  const opened = [];
  globalThis.XMLHttpRequest = scriptedXHR([expired410, [200, { state: 'complete', attachment: { id: 'u2' } }]], opened);
  const tickets = [];
  const api = ticketApi(
    () => (tickets.push(1), `u${tickets.length}`),
    (id) => ({ uploadId: id, state: 'pending' }),
  );
  try {
    let { up, file, handle } = await failedFirstTry(api, (e) => e.code === 'gone' && /link expired/.test(e.message) && /Retry/.test(e.message));
    assert.equal(handle.ticket, null, 'the expired ticket was kept for the retry');
    handle = retryHandle(handle);
    assert.equal((await up.upload(7, file, () => {}, handle)).id, 'u2');
    assert.equal(tickets.length, 2);
    assert.deepEqual(opened, ['/v1/uploads/u1', '/v1/uploads/u2']);
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

for (const [what, upload, says] of [
  ['sent already', { state: 'attached', seq: 4, attachment: { id: 'u1', contentType: 'text/plain', size: 3 } }, /sent already/],
  ['recalled', { state: 'recalled', seq: 4 }, /recalled/],
  ['complete with another file', { state: 'complete', attachment: { id: 'u1', contentType: 'text/plain', size: 9 } }, /another file/],
  ['complete with a file of another kind', { state: 'complete', attachment: { id: 'u1', contentType: 'image/png', size: 3 } }, /another file/],
]) {
  test(`an upload answered 410 whose upload is ${what} fails saying so, rather than return it or upload the file again`, async () => {
    const opened = [];
    globalThis.XMLHttpRequest = scriptedXHR([['lost'], expired410], opened);
    const tickets = [];
    const api = ticketApi(
      () => (tickets.push(1), `u${tickets.length}`),
      (id) => ({ uploadId: id, ...upload }),
    );
    try {
      let { up, file, handle } = await failedFirstTry(api);
      handle = retryHandle(handle);
      await assert.rejects(up.upload(7, file, () => {}, handle), (e) => e.code === 'gone' && says.test(e.message));
      assert.equal(tickets.length, 1, 'the file was uploaded again');
      assert.equal(opened.length, 2);
      assert.equal(handle.ticket, null, 'the ticket was kept: Retry would PUT to it again');
    } finally {
      delete globalThis.XMLHttpRequest;
    }
  });
}

/**
 * An object store's stand-in XMLHttpRequest: each PUT sends every byte
 * (upload.onload), then is answered by the next of answers: 'lost' (the
 * store took the bytes, its answer cut off), 'cut' (the connection broke
 * as the last byte went: the store took nothing) or a status (S3 answers
 * 200 with no JSON). Every URL opened goes to opened, the name of each
 * object the store took to bucket.
 */
function storeXHR(answers, opened, bucket = new Set()) {
  return class {
    constructor() {
      this.upload = {};
    }
    open(method, url) {
      opened.push(url);
      this.url = url;
    }
    setRequestHeader() {}
    getResponseHeader() {
      return null;
    }
    send() {
      const answer = answers.shift() ?? 200;
      setTimeout(() => {
        this.upload.onload?.();
        if (answer === 'lost' || answer === 200) bucket.add(this.url.split('/').pop());
        if (answer === 'lost' || answer === 'cut') return this.onerror(), this.onloadend();
        this.status = answer;
        this.responseText = '';
        this.onload();
        this.onloadend();
      }, 0);
    }
    abort() {}
  };
}

/**
 * chatd with an object store, for the upload of a.txt: tickets (each one's
 * upload u1, u2, …; its URL valid 15 minutes), completions and reads
 * answered by chatd.complete(id) and chatd.get(id), which throw to fail.
 * chatd.tickets and chatd.completions count the requests.
 */
function storeApi(chatd) {
  chatd.tickets = 0;
  chatd.completions = 0;
  return {
    token: 't',
    onUnauthorized() {},
    async request(method, path) {
      if (method === 'POST' && path === '/v1/uploads') {
        const id = `u${++chatd.tickets}`;
        const expiresAt = new Date(Date.now() + 15 * 60000).toISOString();
        return { uploadId: id, url: `https://store.example/${id}`, method: 'PUT', completeUrl: `/v1/uploads/${id}/complete`, expiresAt };
      }
      const m = /^\/v1\/uploads\/(u\d+)(\/complete)?$/.exec(path);
      assert.ok(m, `${method} ${path}`);
      if (m[2]) {
        assert.equal(method, 'POST');
        chatd.completions++;
        return chatd.complete(m[1]);
      }
      assert.equal(method, 'GET');
      return chatd.get(m[1]);
    },
  };
}

const storedAttachment = (id) => ({ id, name: 'a.txt', contentType: 'text/plain', size: 3, sha256: 'ab' });

for (const expired of [false, true]) {
  const when = expired ? 'after its URL expired' : 'while its URL is valid';
  test(`an object-store upload whose bytes the store took, the completion's answer lost, is completed by its Retry ${when}: no second PUT, no second ticket`, async () => {
    const opened = [];
    globalThis.XMLHttpRequest = storeXHR([200], opened);
    const { ApiError } = await import('../src/api.js');
    let lose = true;
    const chatd = {
      complete(id) {
        if (lose) throw new ApiError(0, 'network', 'network error: Failed to fetch');
        return { uploadId: id, state: 'complete', attachment: storedAttachment(id) };
      },
      get: (id) => ({ uploadId: id, state: 'pending' }), // chatd knows nothing of the bucket
    };
    try {
      let { up, file, handle } = await failedFirstTry(storeApi(chatd));
      assert.ok(handle.ticket, 'the ticket was not kept for the retry');
      lose = false;
      if (expired) handle.ticket.expiresAt = new Date(Date.now() - 1000).toISOString();
      handle = retryHandle(handle);
      let progress = 0;
      assert.deepEqual(await up.upload(7, file, (sent, total) => (progress = sent / total), handle), storedAttachment('u1'));
      assert.equal(progress, 1);
      assert.deepEqual(opened, ['https://store.example/u1'], 'the bytes the store holds were sent again');
      assert.equal(chatd.tickets, 1, 'a second ticket was asked for: the file charged again against the day\'s bytes');
      assert.equal(chatd.completions, 2);
    } finally {
      delete globalThis.XMLHttpRequest;
    }
  });

  test(`an object-store upload whose every byte went, the store's answer lost, is completed by its Retry ${when} when they arrived, sent again when they did not`, async () => {
    for (const [answer, arrived] of [['lost', true], ['cut', false]]) {
      const opened = [];
      const bucket = new Set();
      globalThis.XMLHttpRequest = storeXHR([answer, 200], opened, bucket);
      const { ApiError } = await import('../src/api.js');
      const chatd = {
        complete(id) {
          if (!bucket.has(id)) throw new ApiError(400, 'invalid', `upload ${id} has no bytes yet: PUT them to the ticket's url first`);
          return { uploadId: id, state: 'complete', attachment: storedAttachment(id) };
        },
        get: (id) => ({ uploadId: id, state: 'pending' }),
      };
      try {
        let { up, file, handle } = await failedFirstTry(storeApi(chatd));
        if (expired) handle.ticket.expiresAt = new Date(Date.now() - 1000).toISOString();
        handle = retryHandle(handle);
        const a = await up.upload(7, file, () => {}, handle);
        const want = arrived ? ['u1', 1] : expired ? ['u2', 2] : ['u1', 1];
        assert.equal(a.id, want[0], `${answer}: the upload retried`);
        assert.equal(chatd.tickets, want[1], `${answer}: tickets asked for`);
        const puts = arrived ? ['https://store.example/u1'] : ['https://store.example/u1', `https://store.example/${want[0]}`];
        assert.deepEqual(opened, puts, `${answer}: the PUTs`);
      } finally {
        delete globalThis.XMLHttpRequest;
      }
    }
  });
}

test('an object-store PUT the store timed out (S3 answers 400 RequestTimeout: the bytes came too slowly) keeps its ticket, and its Retry PUTs to it again, asking for no second ticket charged again', async () => {
  const opened = [];
  let first = true;
  globalThis.XMLHttpRequest = class extends storeXHR([], opened) {
    send() {
      if (!first) return super.send();
      first = false;
      // Not every byte went (no upload.onload): the store gave up waiting.
      setTimeout(() => {
        this.status = 400;
        this.responseText =
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>RequestTimeout</Code><Message>Your socket connection to the server was not read from or written to within the timeout period.</Message></Error>';
        this.onload();
        this.onloadend();
      }, 0);
    }
  };
  const chatd = {
    complete: (id) => ({ uploadId: id, state: 'complete', attachment: storedAttachment(id) }),
    get: (id) => ({ uploadId: id, state: 'pending' }),
  };
  try {
    let { up, file, handle } = await failedFirstTry(storeApi(chatd), (e) => e.code === 'network');
    assert.ok(handle.ticket, 'the ticket was dropped: Retry asks for a second one, the file charged again against the day\'s bytes');
    handle = retryHandle(handle);
    assert.deepEqual(await up.upload(7, file, () => {}, handle), storedAttachment('u1'));
    assert.deepEqual(opened, ['https://store.example/u1', 'https://store.example/u1']);
    assert.equal(chatd.tickets, 1);
    assert.equal(chatd.completions, 1, 'a completion was asked for bytes that never went whole');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('an object-store upload whose completion finds nothing under the URL though the store answered its PUT 200 (a store that shows an object late) keeps its ticket, and its Retry completes it: no second PUT, no second ticket', async () => {
  const opened = [];
  globalThis.XMLHttpRequest = storeXHR([200], opened);
  const { ApiError } = await import('../src/api.js');
  let visible = false;
  const chatd = {
    complete(id) {
      if (!visible) throw new ApiError(400, 'invalid', `upload ${id} has no bytes yet: PUT them to the ticket's url first`);
      return { uploadId: id, state: 'complete', attachment: storedAttachment(id) };
    },
    get: (id) => ({ uploadId: id, state: 'pending' }),
  };
  try {
    let { up, file, handle } = await failedFirstTry(storeApi(chatd), () => true);
    assert.ok(handle.ticket, 'the ticket was dropped: Retry asks for a second one and PUTs the file again, charged again');
    visible = true;
    handle = retryHandle(handle);
    assert.deepEqual(await up.upload(7, file, () => {}, handle), storedAttachment('u1'));
    assert.deepEqual(opened, ['https://store.example/u1'], 'the bytes the store holds were sent again');
    assert.equal(chatd.tickets, 1);
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

for (const retried of [false, true]) {
  const which = retried ? 'Retry\'s completion' : 'completion';
  test(`an object-store upload whose ${which} finds nothing under the URL because another completion of the bytes took them (the one whose answer was lost, still running on another node) is that upload: no second PUT, no second ticket`, async () => {
    const opened = [];
    globalThis.XMLHttpRequest = storeXHR([200], opened);
    const { ApiError } = await import('../src/api.js');
    // The first completion's answer is lost (the network); the one sent
    // again finds the object gone, the first having completed the
    // upload with it.
    let lost = retried ? 1 : 0;
    const chatd = {
      complete(id) {
        if (lost-- > 0) throw new ApiError(0, 'network', 'network error: Failed to fetch');
        throw new ApiError(400, 'invalid', `upload ${id} has no bytes yet: PUT them to the ticket's url first`);
      },
      get: (id) => ({ uploadId: id, state: 'complete', attachment: storedAttachment(id) }),
    };
    try {
      const up = new Uploader(storeApi(chatd));
      const file = { name: 'a.txt', type: 'text/plain', size: 3 };
      let handle = {};
      if (retried) {
        await assert.rejects(up.upload(7, file, () => {}, handle), (e) => e.code === 'network');
        handle = retryHandle(handle);
      }
      assert.deepEqual(await up.upload(7, file, () => {}, handle), storedAttachment('u1'));
      assert.deepEqual(opened, ['https://store.example/u1'], 'the bytes the store held were sent again');
      assert.equal(chatd.tickets, 1, 'a second ticket was asked for: the file charged again against the day\'s bytes');
    } finally {
      delete globalThis.XMLHttpRequest;
    }
  });
}

test('an object-store upload whose Retry finds it sent already in a message fails saying so, rather than return it or send the file again', async () => {
  const opened = [];
  globalThis.XMLHttpRequest = storeXHR(['lost'], opened);
  const chatd = {
    complete: (id) => ({ uploadId: id, state: 'attached', seq: 4, attachment: storedAttachment(id) }),
    get: (id) => ({ uploadId: id, state: 'attached', seq: 4, attachment: storedAttachment(id) }),
  };
  try {
    let { up, file, handle } = await failedFirstTry(storeApi(chatd));
    handle = retryHandle(handle);
    await assert.rejects(up.upload(7, file, () => {}, handle), (e) => e.code === 'gone' && /^The upload was interrupted, and the file was sent already/.test(e.message));
    assert.deepEqual(opened, ['https://store.example/u1']);
    assert.equal(chatd.tickets, 1);
    assert.equal(handle.ticket, null, 'the ticket was kept: Retry would complete it again');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('an object-store upload whose Retry finds its bytes refused (400, the upload deleted) fails with the refusal, sending nothing again', async () => {
  const opened = [];
  globalThis.XMLHttpRequest = storeXHR(['lost'], opened);
  const { ApiError } = await import('../src/api.js');
  const chatd = {
    complete(id) {
      throw new ApiError(400, 'invalid', `upload ${id} is 4 bytes, not the declared 3; the upload is deleted`);
    },
    get(id) {
      throw new ApiError(404, 'not_found', `there is no upload ${id}`);
    },
  };
  try {
    let { up, file, handle } = await failedFirstTry(storeApi(chatd));
    handle = retryHandle(handle);
    await assert.rejects(up.upload(7, file, () => {}, handle), (e) => e.status === 400 && /not the declared/.test(e.message));
    assert.deepEqual(opened, ['https://store.example/u1']);
    assert.equal(chatd.tickets, 1);
    assert.equal(handle.ticket, null, 'the refused ticket was kept for a retry');
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

test('an avatar chatd answers busy (503, Retry-After) is not asked for again at every render until the Retry-After has passed', async () => {
  const { userAvatar, useBlobs } = await import('../src/views/format.js');
  const undo = fakeDocument();
  const realFetch = globalThis.fetch;
  const asked = [];
  const busy = 'eeeeeeeeeeeeeeeeeeeeeeeeee';
  globalThis.fetch = async (path) => {
    asked.push(path);
    return Response.json({ error: { code: 'unavailable', message: 'the blob store failed', retryAfter: 5 } }, { status: 503, headers: { 'Retry-After': '5' } });
  };
  try {
    useBlobs(new BlobCache({ token: 't' }));
    // The inbox is built again at every event (typing, presence, messages).
    for (let i = 0; i < 5; i++) {
      userAvatar('AB', 2, '', false, `/v1/attachments/${busy}`);
      await settle();
    }
    assert.ok(asked.length <= 1, `a busy chatd was asked ${asked.length} times within its Retry-After: ${asked}`);
  } finally {
    useBlobs(null);
    globalThis.fetch = realFetch;
    undo();
  }
});

test('a download whose answer stops coming (a dead connection) fails, so it is asked again, instead of leaving the picture blank for good', async () => {
  const realFetch = globalThis.fetch;
  const asked = [];
  globalThis.fetch = (path, init) => {
    asked.push(path);
    // The first answer's headers come and then its bytes stop: no error,
    // no end. The second is whole.
    if (asked.length === 1) {
      const body = new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array([1, 2, 3]));
          init.signal?.addEventListener('abort', () => c.error(new DOMException('aborted', 'AbortError')));
        },
      });
      return Promise.resolve(new Response(body, { status: 200 }));
    }
    return Promise.resolve(new Response(new Blob(['png']), { status: 200 }));
  };
  try {
    const cache = new BlobCache({ token: 't' });
    cache.stallMs = 100;
    let timer;
    const first = await Promise.race([
      cache.url('ffffffffffffffffffffffffff').then(() => 'loaded', (e) => e),
      new Promise((r) => (timer = setTimeout(() => r('still downloading after 3 s'), 3000))),
    ]);
    clearTimeout(timer);
    assert.equal(first?.code, 'network', `a stalled download did not fail as a network error: ${first}`);
    assert.match(await cache.url('ffffffffffffffffffffffffff'), /^blob:/, 'the download was not asked again');
    assert.equal(asked.length, 2);
  } finally {
    globalThis.fetch = realFetch;
  }
});

test('a download answered 401 (the token expired or was revoked) signs out, as every other request answered 401 does', async () => {
  const realFetch = globalThis.fetch;
  globalThis.fetch = async () => Response.json({ error: { code: 'unauthorized', message: 'token expired' } }, { status: 401 });
  try {
    let signedOut = 0;
    const cache = new BlobCache({ token: 't', onUnauthorized: () => signedOut++ });
    const err = await cache.url('gggggggggggggggggggggggggg').then(() => null, (e) => e);
    assert.equal(err?.status, 401, `the download did not fail with the 401: ${err}`);
    assert.equal(signedOut, 1, 'a 401 on a download did not sign the user out');
  } finally {
    globalThis.fetch = realFetch;
  }
});

/** fetch answering every download with size bytes; URL.createObjectURL and revokeObjectURL counted in made. */
function sizedDownloads(size) {
  const real = { fetch: globalThis.fetch, create: URL.createObjectURL, revoke: URL.revokeObjectURL };
  const made = new Set();
  URL.createObjectURL = (b) => {
    const u = real.create(b);
    made.add(u);
    return u;
  };
  URL.revokeObjectURL = (u) => {
    made.delete(u);
    real.revoke(u);
  };
  globalThis.fetch = async () => new Response(new Blob([new Uint8Array(size)]), { status: 200 });
  const undo = () => {
    globalThis.fetch = real.fetch;
    URL.createObjectURL = real.create;
    URL.revokeObjectURL = real.revoke;
  };
  return { made, undo };
}

test('full-size photos kept as blob: URLs stay within the cache\'s byte budget, not only its count, and the newest stays', async () => {
  const d = sizedDownloads(10 * 1024 * 1024); // a 10 MiB photo each
  try {
    const cache = new BlobCache({ token: 't' });
    const urls = [];
    for (let i = 0; i < 10; i++) urls.push(await cache.url(`photo${i}`));
    await new Promise((r) => setTimeout(r, 0)); // the revokes run on the settled downloads
    assert.ok(d.made.size * 10 <= 64, `${d.made.size} photos of 10 MiB are kept as blob: URLs, over the 64 MiB budget`);
    assert.ok(d.made.has(urls[9]), 'the photo just downloaded was revoked');
    assert.ok(!d.made.has(urls[0]), 'the oldest photo was kept rather than a newer one');
    assert.equal(cache.maxBytes, 64 * 1024 * 1024, 'the documented budget');
  } finally {
    d.undo();
  }
});

test('a recalled message\'s photos (thumbnail and full size) are revoked when the recall arrives, not kept until evicted', async () => {
  const d = sizedDownloads(3);
  try {
    const cache = new BlobCache({ token: 't' });
    const thumb = await cache.url('gone', true);
    const full = await cache.url('gone');
    const other = await cache.url('kept', true);
    cache.forget(['gone']);
    await new Promise((r) => setTimeout(r, 0));
    assert.ok(!d.made.has(thumb) && !d.made.has(full), 'a recalled photo\'s blob: URL is still alive');
    assert.ok(d.made.has(other), 'another message\'s photo was revoked');
    assert.notEqual(await cache.url('kept', true), undefined);
  } finally {
    d.undo();
  }
});

test('the bearer token goes with a PUT to chatd\'s own path only, not to a scheme-relative //host address or an object store', async () => {
  const sent = {};
  globalThis.XMLHttpRequest = class {
    constructor() {
      this.upload = {};
      this.headers = {};
    }
    open(method, url) {
      this.url = url;
    }
    setRequestHeader(k, v) {
      this.headers[k] = v;
    }
    send() {
      sent[this.url] = this.headers.Authorization ?? null;
      this.status = 200;
      this.responseText = JSON.stringify({ state: 'complete', attachment: { id: 'a' } });
      setTimeout(() => (this.onload(), this.onloadend()), 0);
    }
    abort() {}
  };
  try {
    for (const url of ['/v1/uploads/u1', '//elsewhere.example/v1/uploads/u2', '/\\elsewhere.example/u3', 'https://bucket.example/u4']) {
      const api = pendingApi();
      const done = new Uploader(api).upload(7, { name: 'a.bin', type: 'application/octet-stream', size: 3 }, () => {}, {});
      api.calls[0].resolve({ uploadId: 'u', url, method: 'PUT' });
      if (!url.startsWith('/v1')) {
        await new Promise((r) => setTimeout(r, 20));
        api.calls[1]?.resolve({ attachment: { id: 'a' } });
      }
      await done.catch(() => {});
    }
    assert.deepEqual(sent, {
      '/v1/uploads/u1': 'Bearer t',
      '//elsewhere.example/v1/uploads/u2': null,
      '/\\elsewhere.example/u3': null,
      'https://bucket.example/u4': null,
    });
  } finally {
    delete globalThis.XMLHttpRequest;
  }
});

/** What chatd answers an upload step of conversation 7 for an uploader who left it, or whom its other member blocked. */
const refusals = {
  not_member: { status: 403, error: { code: 'not_member', message: 'not a member of conversation 7' }, why: /no longer in this conversation.*left.*removed/i },
  blocked: { status: 403, error: { code: 'blocked', message: 'blocked by this user' }, why: /blocked you/i },
};

for (const step of ['its ticket', 'its bytes', 'their completion']) {
  for (const [code, r] of Object.entries(refusals)) {
    test(`an upload refused 403 ${code} at ${step} says why on the tray: ${code === 'blocked' ? 'the other member blocked the user' : 'the user left or was removed'}`, async () => {
      const { ApiError } = await import('../src/api.js');
      const refuse = () => new ApiError(r.status, r.error.code, r.error.message);
      globalThis.XMLHttpRequest = class extends completingXHR('u1') {
        send() {
          if (step !== 'its bytes') return super.send();
          this.status = r.status;
          this.responseText = JSON.stringify({ error: r.error });
          setTimeout(() => (this.onload(), this.onloadend()), 0);
        }
      };
      const api = {
        token: 't',
        onUnauthorized() {},
        async request(method, path) {
          if (path === '/v1/uploads') {
            if (step === 'its ticket') throw refuse();
            const expiresAt = new Date(Date.now() + 15 * 60000).toISOString();
            // chatd's own PUT, or an object store's and chatd's completion.
            if (step === 'its bytes') return { uploadId: 'u1', url: '/v1/uploads/u1', method: 'PUT', expiresAt };
            return { uploadId: 'u1', url: 'https://store.example/u1', method: 'PUT', completeUrl: '/v1/uploads/u1/complete', expiresAt };
          }
          assert.equal(path, '/v1/uploads/u1/complete');
          throw refuse();
        },
      };
      try {
        const up = new Uploader(api);
        const handle = {};
        const err = await up.upload(7, { name: 'a.txt', type: 'text/plain', size: 3 }, () => {}, handle).then(() => null, (e) => e);
        assert.equal(err?.code, code);
        assert.match(err.message, r.why, `the tray says "${err.message}"`);
        assert.equal(handle.ticket, null, 'the refused ticket was kept for a retry');
      } finally {
        delete globalThis.XMLHttpRequest;
      }
    });
  }
}

/**
 * The composer's tray on the stand-in DOM, its uploads for conversation 7
 * by an Uploader whose ticket requests fail with fail(): the tray and the
 * item of a.txt once its upload failed.
 */
async function failedTray(fail) {
  const t = await trayWith(ticketApi(() => { throw fail(); }));
  await settle();
  return t;
}

/** The composer's tray on the stand-in DOM, uploading a.txt for conversation 7 through api: the tray and its item. */
async function trayWith(api) {
  const { createTray } = await import('../src/views/attachments.js');
  const tray = createTray(new Uploader(api), () => 7, () => {});
  tray.add([{ name: 'a.txt', type: 'text/plain', size: 3 }]);
  return { tray, item: tray.el.find('tray-item') };
}

test('an upload refused for good (403 not_member or blocked: the uploader may no longer write there; 413 too large; 415 a type chatd does not take) offers only Remove, with the reason', async () => {
  const { ApiError } = await import('../src/api.js');
  const forGood = [
    ...Object.values(refusals).map((r) => ({ e: new ApiError(r.status, r.error.code, r.error.message), why: r.why })),
    { e: new ApiError(413, 'too_large', 'the file is over the 25 MiB uploads may have'), why: /over the 25 MiB/ },
    { e: new ApiError(415, 'unsupported', 'application/x-msdownload is not accepted'), why: /is not accepted/ },
  ];
  const undo = fakeDocument();
  try {
    for (const { e, why } of forGood) {
      const { tray, item } = await failedTray(() => e);
      assert.equal(item.dataset.status, 'failed');
      assert.match(item.find('tray-state').textContent, why, `${e.status} ${e.code}: the tray says "${item.find('tray-state').textContent}"`);
      assert.equal(item.find('tray-retry').hidden, true, `${e.status} ${e.code}: the tray offers Retry, which can only be refused the same way`);
      assert.equal(item.find('tray-remove').hidden, false);
      item.find('tray-remove').dispatch('click');
      assert.equal(tray.count(), 0, `${e.status} ${e.code}: Remove left the file in the tray`);
    }
  } finally {
    undo();
  }
});

test('an upload that failed for now (the network, a 5xx, a 429) offers Retry', async () => {
  const { ApiError } = await import('../src/api.js');
  const undo = fakeDocument();
  try {
    for (const e of [new ApiError(0, 'network', 'network error'), new ApiError(503, 'unavailable', 'try later'), new ApiError(429, 'rate_limited', 'slow down')]) {
      const { item } = await failedTray(() => e);
      assert.equal(item.dataset.status, 'failed');
      assert.equal(item.find('tray-retry').hidden, false, `${e.status} ${e.code}: no Retry`);
    }
  } finally {
    undo();
  }
});

/**
 * A stand-in XMLHttpRequest whose PUTs, noted in sent, are answered in
 * turn with answers ({status, retryAfter, error}; past the last: 200, the
 * complete upload u1), on setImmediate, which fake timers leave running.
 */
function answeringXHR(answers, sent) {
  return class {
    constructor() {
      this.upload = {};
      this.answer = {};
    }
    open() {}
    setRequestHeader() {}
    getResponseHeader(k) {
      return k.toLowerCase() === 'retry-after' && this.answer.retryAfter ? String(this.answer.retryAfter) : null;
    }
    send() {
      const a = (this.answer = answers[sent.length] ?? { status: 200 });
      sent.push(a);
      this.status = a.status;
      this.responseText = JSON.stringify(a.status === 200 ? { state: 'complete', attachment: { id: 'u1' } } : { error: { ...a.error, retryAfter: a.retryAfter } });
      setImmediate(() => (this.onload(), this.onloadend()));
    }
    abort() {}
  };
}

/** Runs what is due now, timers aside (the fake timers move when told). */
async function drain() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

/** chatd's answer to a PUT while 16 of the user's PUTs run on the node (docs/http.md "Attachments"). */
const tooManyRunning = { status: 429, retryAfter: 10, error: { code: 'rate_limited', message: 'too many uploads running: at most 16 per user; retry in 10s' } };

test('an upload whose PUT chatd answers 429 (16 of the user\'s PUTs running, Retry-After 10) waits the Retry-After, saying so, and PUTs again by itself', async (t) => {
  const undo = fakeDocument();
  // The test's clock: a loaded machine delays real timers, these move only when told.
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
  const sent = [];
  globalThis.XMLHttpRequest = answeringXHR([tooManyRunning], sent);
  try {
    const { tray, item } = await trayWith(ticketApi(() => 'u1'));
    await drain();
    assert.equal(sent.length, 1);
    const state = () => `${item.dataset.status}: "${item.find('tray-state').textContent}"`;
    assert.equal(item.dataset.status, 'waiting', `the tray shows ${state()}`);
    assert.match(item.find('tray-state').textContent, /^chatd is busy, retrying in 1[0-3] s$/);
    assert.equal(item.find('tray-retry').hidden, true, 'Retry is offered while the upload waits to be sent again by itself');
    t.mock.timers.tick(9999);
    await drain();
    assert.equal(sent.length, 1, 'PUT again before its Retry-After');
    // The Retry-After plus up to a quarter of it (retryAfterDelay's spread).
    t.mock.timers.tick(2501);
    await drain();
    assert.equal(sent.length, 2, `not PUT again 12.5 s after a Retry-After of 10 s: ${state()}`);
    assert.equal(item.dataset.status, 'done', state());
    assert.equal(tray.busy(), false);
  } finally {
    delete globalThis.XMLHttpRequest;
    undo();
  }
});

test('an upload waiting out a 429 is removed from the tray at once, and neither PUT nor asked for again', async (t) => {
  const undo = fakeDocument();
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
  const sent = [];
  globalThis.XMLHttpRequest = answeringXHR([tooManyRunning], sent);
  let tickets = 0;
  try {
    const { tray, item } = await trayWith(ticketApi(() => (tickets++, 'u1')));
    await drain();
    assert.equal(item.dataset.status, 'waiting');
    item.find('tray-remove').dispatch('click');
    assert.equal(tray.count(), 0, 'Remove left the waiting file in the tray');
    t.mock.timers.tick(60000);
    await drain();
    assert.deepEqual([tickets, sent.length], [1, 1], 'an upload removed while it waited was sent again');
  } finally {
    delete globalThis.XMLHttpRequest;
    undo();
  }
});

test('a ticket answered 429 for the upload rate is asked again after its Retry-After; one for the day\'s bytes (Retry-After until midnight UTC) fails at once with its reason and Retry', async (t) => {
  const { ApiError } = await import('../src/api.js');
  const undo = fakeDocument();
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
  globalThis.XMLHttpRequest = answeringXHR([], []);
  try {
    let asked = 0;
    const rate = await trayWith(ticketApi(() => {
      if (++asked === 1) throw new ApiError(429, 'rate_limited', 'rate limited: at most 1 upload per second (burst 30); retry in 1s', 1);
      return 'u1';
    }));
    await drain();
    assert.equal(rate.item.dataset.status, 'waiting', `${rate.item.dataset.status}: "${rate.item.find('tray-state').textContent}"`);
    t.mock.timers.tick(1250);
    await drain();
    assert.equal(asked, 2, 'the ticket was not asked for again after its Retry-After');
    assert.equal(rate.item.dataset.status, 'done');

    let daily = 0;
    const quota = await trayWith(ticketApi(() => {
      daily++;
      throw new ApiError(429, 'rate_limited', 'upload quota: 1 GiB a day used; retry after midnight UTC', 5 * 3600);
    }));
    await drain();
    assert.equal(quota.item.dataset.status, 'failed', 'a wait of hours is not waited out in the tray');
    assert.match(quota.item.find('tray-state').textContent, /a day used/);
    assert.equal(quota.item.find('tray-retry').hidden, false, 'no Retry, which passes after midnight');
    t.mock.timers.tick(120000);
    await drain();
    assert.equal(daily, 1, "the ticket refused for the day's bytes was asked for again by itself");
  } finally {
    delete globalThis.XMLHttpRequest;
    undo();
  }
});
