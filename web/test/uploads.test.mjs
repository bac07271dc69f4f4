// Unit tests of src/uploads.js: the Uploader's cancel. Plain Node with a
// stand-in for the browser's XMLHttpRequest. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Uploader } from '../src/uploads.js';

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
