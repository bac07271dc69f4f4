// The message lifecycle in the conversation view: the reply quote above a
// bubble, the "Forwarded" line, the "Message deleted" tombstone, the
// "edited" mark, reactions under the bubble, the per-message actions menu
// (react, reply, forward, edit, delete for everyone), the composer's
// "Replying to" / "Editing" banner, and the forward and delete dialogs.
// conversation.js places these parts; what they show comes from the model
// (store/lifecycle.js), which applies every change by seq.

import { h, icon, setText } from './dom.js';
import { avatar, conversationTitle, msgTypeLabel, userName } from './format.js';
import { snippet } from '../store/lifecycle.js';

/** The quick reactions offered in the actions menu. */
export const QUICK_REACTIONS = ['👍', '❤️', '😂', '😮', '😢', '🙏'];

/**
 * The parts of one message row that the lifecycle adds.
 * @param {{jump:(seq:number)=>void, toggle:(emoji:string, on:boolean)=>void, openActions:(btn:HTMLElement)=>void}} on
 */
export function lifecycleParts(on) {
  const quoteWho = h('span', { class: 'quote-who' });
  const quoteText = h('span', { class: 'quote-text' });
  const quote = h('button', { class: 'reply-quote', type: 'button', 'data-testid': 'reply-quote' }, quoteWho, quoteText);
  quote.addEventListener('click', () => quote.dataset.seq && on.jump(Number(quote.dataset.seq)));
  const forwarded = h('div', { class: 'forwarded', 'data-testid': 'forwarded' }, icon('forward'), 'Forwarded');
  const edited = h('span', { class: 'edited', 'data-testid': 'edited' }, 'edited');
  const reactions = h('div', { class: 'reactions', 'data-testid': 'reactions', role: 'group', 'aria-label': 'Reactions' });
  const actionsBtn = h(
    'button',
    { class: 'msg-actions-btn', type: 'button', title: 'Message actions', 'aria-label': 'Message actions', 'aria-haspopup': 'menu', 'aria-expanded': 'false', 'data-testid': 'message-actions' },
    icon('more'),
  );
  actionsBtn.addEventListener('click', () => on.openActions(actionsBtn));
  let shownReactions = '';

  /**
   * @param {{m:any, quote:{seq:number,senderId:number,snippet:string,recalled:boolean,msgType?:string}|null,
   *   me:number, actionable:boolean}} d
   */
  function update(d) {
    const m = d.m;
    quote.hidden = !d.quote;
    if (d.quote) {
      quote.dataset.seq = String(d.quote.seq);
      setText(quoteWho, d.quote.senderId ? userName(d.quote.senderId, d.me) : 'Reply');
      // A photo, voice note or file without a caption has no snippet:
      // its type stands for it, as in the inbox preview.
      const said = d.quote.snippet || msgTypeLabel(d.quote.msgType);
      setText(quoteText, d.quote.recalled ? 'Message deleted' : said || '…');
      quoteText.classList.toggle('deleted', d.quote.recalled);
      quote.setAttribute('aria-label', `Reply to ${d.quote.senderId ? userName(d.quote.senderId, d.me) : 'a message'}: ${d.quote.recalled ? 'message deleted' : said}. Show the message.`);
    }
    forwarded.hidden = !m.forwardedFrom || !!m.recalled;
    edited.hidden = !m.editedAt || !!m.recalled;
    actionsBtn.hidden = !d.actionable;
    const list = m.recalled ? [] : m.reactions || [];
    // Rebuilt only when they changed, so a chip keeps focus across renders.
    const key = JSON.stringify(list);
    if (key !== shownReactions) {
      shownReactions = key;
      reactions.replaceChildren(
        ...list.map((r) =>
          h(
            'button',
            {
              class: `reaction${r.me ? ' mine' : ''}`,
              type: 'button',
              'aria-pressed': r.me ? 'true' : 'false',
              'aria-label': `${r.emoji} ${r.count}${r.me ? ', including you. Remove your reaction' : `. React with ${r.emoji}`}`,
              title: r.me ? 'Remove your reaction' : `React with ${r.emoji}`,
              'data-testid': 'reaction',
              'data-emoji': r.emoji,
              onclick: () => on.toggle(r.emoji, !r.me),
            },
            h('span', { class: 'reaction-emoji', 'aria-hidden': 'true' }, r.emoji),
            h('span', { class: 'reaction-count', 'aria-hidden': 'true' }, String(r.count)),
          ),
        ),
      );
    }
    reactions.hidden = list.length === 0;
  }
  return { quote, forwarded, edited, reactions, actionsBtn, update };
}

/**
 * The actions menu of one message, anchored to its button; closes on
 * Escape, a click elsewhere, or scrolling.
 * @param {HTMLElement} anchor
 * @param {{react?:(emoji:string)=>void, reply?:()=>void, forward?:()=>void, edit?:()=>void, recall?:()=>void, mine:boolean,
 *   reacted:Set<string>}} o the actions this message allows
 */
export function openActionsMenu(anchor, o) {
  closeMenus();
  const items = [];
  const item = (label, ic, run, testid, cls = '') => {
    const b = h('button', { class: `menu-item ${cls}`.trim(), type: 'button', role: 'menuitem', 'data-testid': testid }, icon(ic), label);
    b.addEventListener('click', () => {
      close();
      run();
    });
    items.push(b);
    return b;
  };
  const emojis = o.react
    ? h(
        'div',
        { class: 'menu-reactions', role: 'group', 'aria-label': 'React' },
        QUICK_REACTIONS.map((e) => {
          const on = o.reacted.has(e);
          const b = h(
            'button',
            { class: `menu-emoji${on ? ' mine' : ''}`, type: 'button', role: 'menuitemcheckbox', 'aria-checked': on ? 'true' : 'false', 'aria-label': `React with ${e}`, title: `React with ${e}`, 'data-testid': 'react-option', 'data-emoji': e },
            e,
          );
          b.addEventListener('click', () => {
            close();
            o.react(e);
          });
          items.push(b);
          return b;
        }),
      )
    : null;
  const menu = h(
    'div',
    { class: 'msg-menu', role: 'menu', 'aria-label': 'Message actions', 'data-testid': 'message-menu' },
    emojis,
    o.reply && item('Reply', 'reply', o.reply, 'action-reply'),
    o.forward && item('Forward', 'forward', o.forward, 'action-forward'),
    o.edit && item('Edit', 'edit', o.edit, 'action-edit'),
    o.recall && item('Delete for everyone', 'delete', o.recall, 'action-delete', 'danger'),
  );
  document.body.appendChild(menu);
  // Fixed to the viewport beside the button, kept inside it (phones).
  const r = anchor.getBoundingClientRect();
  const mw = menu.offsetWidth, mh = menu.offsetHeight;
  const vw = document.documentElement.clientWidth, vh = document.documentElement.clientHeight;
  let left = o.mine ? r.right - mw : r.left;
  left = Math.max(8, Math.min(left, vw - mw - 8));
  let top = r.bottom + 4;
  if (top + mh > vh - 8) top = Math.max(8, r.top - mh - 4);
  menu.style.left = `${left}px`;
  menu.style.top = `${top}px`;
  anchor.setAttribute('aria-expanded', 'true');

  const onKey = (e) => {
    const i = items.indexOf(document.activeElement);
    if (e.key === 'Escape') {
      e.preventDefault();
      close();
      anchor.focus();
    } else if (e.key === 'ArrowDown' || e.key === 'ArrowRight') {
      e.preventDefault();
      items[(i + 1) % items.length]?.focus();
    } else if (e.key === 'ArrowUp' || e.key === 'ArrowLeft') {
      e.preventDefault();
      items[(i - 1 + items.length) % items.length]?.focus();
    } else if (e.key === 'Tab') close();
  };
  const onDown = (e) => {
    if (!menu.contains(e.target) && e.target !== anchor && !anchor.contains(e.target)) close();
  };
  const onScroll = (e) => {
    if (!menu.contains(e.target)) close();
  };
  function close() {
    if (!menu.isConnected) return;
    menu.remove();
    anchor.setAttribute('aria-expanded', 'false');
    document.removeEventListener('keydown', onKey, true);
    document.removeEventListener('mousedown', onDown, true);
    document.removeEventListener('scroll', onScroll, true);
    window.removeEventListener('resize', close);
    openClose = null;
  }
  document.addEventListener('keydown', onKey, true);
  document.addEventListener('mousedown', onDown, true);
  document.addEventListener('scroll', onScroll, true);
  window.addEventListener('resize', close);
  openClose = close;
  items[0]?.focus();
}

let openClose = null;
/** Closes an open actions menu (switching conversations, re-rendering). */
export function closeMenus() {
  if (openClose) openClose();
}

// The dismiss functions of the dialogs and panels about the open
// conversation (Add member, Delete for everyone, Forward, its details).
const aboutOpen = new Set();

/**
 * Registers dismiss, the function that closes a dialog or panel about
 * the open conversation as its Cancel does: another conversation opened
 * underneath (a notification's click, Back) closes it, or it would act
 * on the one no longer shown. Returns the function that forgets it.
 */
export function aboutOpenConversation(dismiss) {
  aboutOpen.add(dismiss);
  return () => aboutOpen.delete(dismiss);
}

/** Leaving the open conversation: its menu, dialogs and panels close. */
export function leaveConversation() {
  closeMenus();
  for (const dismiss of [...aboutOpen]) dismiss();
}

/**
 * The banner above the composer while replying to or editing a message.
 * @param {()=>void} onCancel
 */
export function composerBanner(onCancel) {
  const title = h('strong', { class: 'banner-title' });
  const text = h('span', { class: 'banner-text' });
  const cancel = h('button', { class: 'icon-btn', type: 'button', title: 'Cancel', 'aria-label': 'Cancel', 'data-testid': 'banner-cancel', onclick: onCancel }, icon('close'));
  const el = h(
    'div',
    { class: 'composer-banner', 'data-testid': 'composer-banner', hidden: true },
    icon('reply'),
    h('div', { class: 'banner-main' }, title, text),
    cancel,
  );
  const ic = el.firstChild;
  return {
    el,
    /**
     * Shows the banner for replying to or editing message m: its text, or
     * for a photo, voice note or file without a caption its type, as its
     * quote will say it.
     * @param {{kind:'reply'|'edit', who?:string, m:{body?:string|null, msgType?:string}}|null} mode
     */
    show(mode) {
      el.hidden = !mode;
      if (!mode) return;
      el.dataset.mode = mode.kind;
      ic.replaceWith(icon(mode.kind === 'edit' ? 'edit' : 'reply'));
      setText(title, mode.kind === 'edit' ? 'Editing message' : `Replying to ${mode.who}`);
      cancel.setAttribute('aria-label', mode.kind === 'edit' ? 'Cancel editing' : 'Cancel reply');
      setText(text, snippet(mode.m.body) || msgTypeLabel(mode.m.msgType));
    },
  };
}

/**
 * Picks the conversation to forward a message to (the current one
 * included: forwarding into it is allowed). Resolves with its id, or null
 * when cancelled.
 * @param {import('../store/state.js').ChatState} state
 * @param {string} preview the forwarded text
 */
export function pickConversation(state, preview) {
  return new Promise((resolve) => {
    const filter = h('input', { type: 'search', placeholder: 'Search conversations', 'aria-label': 'Search conversations', autocomplete: 'off', 'data-testid': 'forward-filter' });
    const list = h('ul', { class: 'pick-list', 'aria-label': 'Conversations' });
    const draw = () => {
      const q = filter.value.trim().toLowerCase();
      const convs = state.sortedConversations().filter((c) => !q || conversationTitle(c).toLowerCase().includes(q));
      list.replaceChildren(
        ...convs.map((c) =>
          h(
            'li',
            null,
            h(
              'button',
              { class: 'pick-row', type: 'button', 'data-testid': 'forward-target', 'data-conv-id': c.id, onclick: () => done(c.id) },
              avatar(c),
              h('span', { class: 'conv-title' }, conversationTitle(c)),
            ),
          ),
        ),
      );
      if (!convs.length) list.append(h('li', { class: 'muted pick-empty' }, 'No conversation matches.'));
    };
    filter.addEventListener('input', draw);
    const { close } = modal('Forward message', [h('p', { class: 'forward-preview' }, preview), filter, list], [h('button', { class: 'btn', type: 'button', onclick: () => done(null) }, 'Cancel')], () => done(null));
    function done(v) {
      close();
      resolve(v);
    }
    draw();
    filter.focus();
  });
}

/** "Delete for everyone?": resolves true when confirmed. */
export function confirmRecall() {
  return new Promise((resolve) => {
    const ok = h('button', { class: 'btn danger', type: 'button', 'data-testid': 'confirm-delete', onclick: () => done(true) }, 'Delete');
    const { close } = modal(
      'Delete for everyone?',
      [h('p', { class: 'muted' }, 'The message is removed for every member and replaced by “Message deleted”. This cannot be undone.')],
      [h('button', { class: 'btn', type: 'button', onclick: () => done(false) }, 'Cancel'), ok],
      () => done(false),
    );
    function done(v) {
      close();
      resolve(v);
    }
    ok.focus();
  });
}

/** A modal like views/dialogs.js's, for content that is not a form. */
function modal(title, body, actions, onDismiss) {
  const box = h(
    'div',
    { class: 'modal', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'lc-dlg-title', 'data-testid': 'dialog' },
    h('h2', { id: 'lc-dlg-title' }, title),
    body,
    h('div', { class: 'modal-actions' }, actions),
  );
  const backdrop = h('div', { class: 'modal-backdrop' }, box);
  const prevFocus = document.activeElement;
  const onKey = (e) => {
    if (e.key === 'Escape') onDismiss();
  };
  backdrop.addEventListener('mousedown', (e) => {
    if (e.target === backdrop) onDismiss();
  });
  document.addEventListener('keydown', onKey);
  document.body.appendChild(backdrop);
  const forget = aboutOpenConversation(onDismiss);
  return {
    close() {
      forget();
      backdrop.remove();
      document.removeEventListener('keydown', onKey);
      if (prevFocus && prevFocus.isConnected && prevFocus.focus) prevFocus.focus();
    },
  };
}
