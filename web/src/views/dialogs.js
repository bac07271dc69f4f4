// Small modal forms: new direct chat, new group, add member. Each runs its
// action on submit and stays open with the server's message on failure,
// so a typo in a user id is fixed in place. A request of the action that
// waits to be retried (chatd busy) says so there; closing stops it.

import { h } from './dom.js';
import { waitText } from '../api.js';
import { aboutOpenConversation } from './lifecycle.js';

/**
 * @param {{title:string, submit:string, fields:{name:string,label:string,placeholder?:string,type?:string,hint?:string}[],
 *   run:(values:Record<string,string>, req:import('../api.js').Req)=>Promise<void>, bound?:boolean}} o
 *   bound: the dialog is about the open conversation, and closes when another one opens
 */
export function openDialog({ title, submit, fields, run, bound = false }) {
  const error = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'dialog-error' });
  const inputs = fields.map((f) =>
    h('input', {
      id: `dlg-${f.name}`,
      name: f.name,
      type: f.type || 'text',
      placeholder: f.placeholder || '',
      autocomplete: 'off',
      'data-testid': `dialog-${f.name}`,
      ...(f.type === 'number' ? { min: '1', step: '1', inputmode: 'numeric' } : {}),
    }),
  );
  const okBtn = h('button', { class: 'btn primary', type: 'submit', 'data-testid': 'dialog-submit' }, submit);
  const cancel = h('button', { class: 'btn', type: 'button', onclick: () => close() }, 'Cancel');
  const form = h(
    'form',
    { class: 'modal', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'dlg-title', 'data-testid': 'dialog' },
    h('h2', { id: 'dlg-title' }, title),
    fields.map((f, i) => h('div', { class: 'field' }, h('label', { for: `dlg-${f.name}` }, f.label), inputs[i], f.hint && h('p', { class: 'hint' }, f.hint))),
    error,
    h('div', { class: 'modal-actions' }, cancel, okBtn),
  );
  const backdrop = h('div', { class: 'modal-backdrop' }, form);
  const prevFocus = document.activeElement;
  const ctl = new AbortController();
  const req = { signal: ctl.signal, onWait: (s, err) => (error.textContent = s ? waitText(s, err) : '') };

  const forget = bound ? aboutOpenConversation(() => close()) : () => {};
  function close() {
    forget();
    ctl.abort();
    backdrop.remove();
    document.removeEventListener('keydown', onKey);
    if (prevFocus && prevFocus.focus) prevFocus.focus();
  }
  function onKey(e) {
    if (e.key === 'Escape') close();
  }
  backdrop.addEventListener('mousedown', (e) => {
    if (e.target === backdrop) close();
  });
  document.addEventListener('keydown', onKey);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const values = Object.fromEntries(fields.map((f, i) => [f.name, inputs[i].value.trim()]));
    okBtn.disabled = true;
    error.textContent = '';
    try {
      await run(values, req);
      close();
    } catch (err) {
      if (err.code === 'aborted') return;
      error.textContent = err.message || String(err);
    } finally {
      okBtn.disabled = false;
    }
  });
  document.body.appendChild(backdrop);
  inputs[0].focus();
}

/** Parses one user id, with a message a person understands. */
export function parseUserId(s, what = 'User id') {
  if (!/^[1-9][0-9]{0,15}$/.test(s)) throw new Error(`${what} must be a positive whole number.`);
  return Number(s);
}

/** "2, 3 4" -> [2, 3, 4] */
export function parseUserIds(s) {
  const parts = s.split(/[\s,]+/).filter(Boolean);
  return parts.map((p) => parseUserId(p, `"${p}"`));
}
