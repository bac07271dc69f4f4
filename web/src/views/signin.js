// Sign-in screen: paste a JWT (production: tokens come from your identity
// system or `chatctl token`), or in dev mode just pick a user id.

import { h, icon } from './dom.js';
import { devToken, saveSignIn } from '../auth.js';

/**
 * @param {{dev:boolean, notice?:string, onSignedIn:(s:{token:string,userId:number})=>void}} o
 */
export function signInView({ dev, notice, onSignedIn }) {
  const error = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'signin-error' }, notice || '');

  const fail = (e) => {
    error.textContent = e.message || String(e);
  };
  // The app starts once. It takes a moment (its client id, the outbox),
  // the form still on screen: a second submit (a double click) would
  // start a second app, which no sign-out of the first would end.
  let done = false;
  const signedIn = (s) => {
    done = true;
    onSignedIn(s);
  };

  const tokenInput = h('textarea', {
    id: 'token',
    rows: '4',
    placeholder: 'eyJhbGciOiJIUzI1NiIs…',
    spellcheck: 'false',
    autocomplete: 'off',
    'data-testid': 'token-input',
  });
  const tokenForm = h(
    'form',
    {
      class: 'stack',
      onsubmit: (e) => {
        e.preventDefault();
        if (done) return;
        try {
          signedIn(saveSignIn(tokenInput.value));
        } catch (err) {
          fail(err);
        }
      },
    },
    h('label', { for: 'token' }, 'Access token'),
    tokenInput,
    h('p', { class: 'hint' }, 'A JWT whose subject is your user id. Run ', h('code', null, 'chatctl token --user N'), ' to make one.'),
    h('button', { class: 'btn primary', type: 'submit' }, 'Sign in with token'),
  );

  let devForm = null;
  if (dev) {
    const uid = h('input', {
      id: 'dev-user',
      type: 'number',
      min: '1',
      step: '1',
      inputmode: 'numeric',
      placeholder: 'e.g. 1',
      required: true,
      'data-testid': 'dev-user',
    });
    const btn = h('button', { class: 'btn primary', type: 'submit', 'data-testid': 'dev-signin' }, 'Sign in');
    devForm = h(
      'form',
      {
        class: 'stack dev-signin',
        onsubmit: async (e) => {
          e.preventDefault();
          if (done) return;
          const n = Number(uid.value);
          if (!Number.isSafeInteger(n) || n <= 0) {
            fail(new Error('Enter a positive whole number.'));
            return;
          }
          btn.disabled = true;
          try {
            const t = await devToken(n);
            if (!done) signedIn(saveSignIn(t));
          } catch (err) {
            fail(err);
          } finally {
            btn.disabled = false;
          }
        },
      },
      h('div', { class: 'dev-badge' }, 'Development mode'),
      h('label', { for: 'dev-user' }, 'User id'),
      h('div', { class: 'row' }, uid, btn),
      h('p', { class: 'hint' }, 'chatd runs with --dev: anyone can sign in as anyone. Open a second window to chat with yourself.'),
    );
  }

  return h(
    'main',
    { class: 'signin', 'data-testid': 'signin' },
    h(
      'section',
      { class: 'signin-card' },
      h('div', { class: 'brand' }, h('span', { class: 'brand-mark' }, icon('chat')), h('h1', null, 'chatd')),
      h('p', { class: 'lede' }, 'Sign in to your conversations.'),
      error,
      devForm,
      devForm && h('div', { class: 'divider' }, h('span', null, 'or')),
      tokenForm,
    ),
  );
}
