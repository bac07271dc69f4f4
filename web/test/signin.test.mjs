// Unit tests of the sign-in screen (src/views/signin.js) on the stand-in
// DOM. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';

/** An unsigned JWT for user uid that expires in an hour (the page does not verify). */
function token(uid) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub: String(uid), exp: Math.floor(Date.now() / 1000) + 3600 })}.c2ln`;
}

test('a sign-in submitted twice (a double click) starts the app once: a second app would stay connected after signing out', async () => {
  const undo = fakeDocument();
  const store = new Map();
  globalThis.localStorage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, String(v)), removeItem: (k) => store.delete(k) };
  try {
    const { signInView } = await import('../src/views/signin.js');
    const started = [];
    const view = signInView({ dev: false, notice: '', onSignedIn: (s) => started.push(s.userId) });
    const input = view.find('token-input');
    input.value = token(4);
    const form = input.parent;
    // The app starts asynchronously (its client id, the outbox): the form
    // is still on screen for the second click.
    form.dispatch('submit');
    form.dispatch('submit');
    assert.deepEqual(started, [4], 'the sign-in started the app more than once');
  } finally {
    delete globalThis.localStorage;
    undo();
  }
});
