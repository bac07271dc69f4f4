// The open conversation: header, message list, typing line and composer.
// Message nodes are keyed by clientMsgId, so a pending message turns into
// the committed one in place (no flicker, the text selection survives), and
// re-renders touch only what changed.

import { h, icon, setText } from './dom.js';
import { avatar, charsOverLimit, clockTime, conversationTitle, dayLabel, systemText, tooLongText, typingText, userName } from './format.js';
import { attachmentList, createTray, openLightbox } from './attachments.js';
import { composerBanner, confirmRecall, leaveConversation, lifecycleParts, openActionsMenu, pickConversation } from './lifecycle.js';
import { quoteOf, snippet } from '../store/lifecycle.js';
import { changeFailedText } from '../store/sync.js';

/** What the forward dialog shows of a message without text: its files. */
function filesPreview(m) {
  const files = m.attachments || [];
  return files.length === 1 ? files[0].name : files.length ? `${files.length} files` : '';
}

/**
 * @param {import('../store/state.js').ChatState} state
 * @param {import('../store/sync.js').Sync} sync
 * @param {{uploader: import('../uploads.js').Uploader, cache: import('../uploads.js').BlobCache}} media
 * @param {{back:()=>void, addMember:(cid:number)=>void, info:(cid:number)=>void, notify?:(msg:string)=>void}} actions
 */
const DRAFT_PREFIX = 'chatd.draft.';

/**
 * What user me was writing in each conversation and has not sent, kept in
 * the tab's sessionStorage: opening another conversation, or a reload (a
 * phone's browser discards a background tab), does not lose it. Per tab, as
 * the composer is, and gone with the tab; signing out removes it.
 */
function composerDrafts(me, storage = globalThis.sessionStorage ?? null) {
  const prefix = `${DRAFT_PREFIX}${me}.`;
  return {
    get(cid) {
      try {
        return storage?.getItem(prefix + cid) ?? '';
      } catch {
        return '';
      }
    },
    set(cid, text) {
      try {
        if (text) storage?.setItem(prefix + cid, text);
        else storage?.removeItem(prefix + cid);
      } catch {
        // Full or unavailable: the draft lasts as long as it is on screen.
      }
    },
    clear() {
      try {
        const keys = [];
        for (let i = 0; i < (storage?.length ?? 0); i++) keys.push(storage.key(i));
        for (const k of keys) if (k && k.startsWith(prefix)) storage.removeItem(k);
      } catch {
        // Unavailable: nothing was kept.
      }
    },
  };
}

export function createConversationView(state, sync, media, actions) {
  const titleEl = h('h2', { 'data-testid': 'chat-title' });
  const subtitleEl = h('p', { class: 'subtitle', 'data-testid': 'chat-subtitle' });
  const avatarSlot = h('span', { class: 'avatar-slot' });
  const addBtn = h(
    'button',
    { class: 'btn', type: 'button', 'data-testid': 'add-member', onclick: () => actions.addMember(state.openId) },
    icon('plus'),
    h('span', { class: 'label' }, 'Add member'),
  );
  const infoBtn = h(
    'button',
    { class: 'icon-btn', type: 'button', title: 'Details', 'aria-label': 'Conversation details', 'data-testid': 'info', onclick: () => actions.info(state.openId) },
    icon('info'),
  );
  const older = h('div', { class: 'older', 'data-testid': 'older' });
  const list = h('div', { class: 'message-list' });
  const scroller = h(
    'div',
    { class: 'messages', 'data-testid': 'messages', role: 'log', 'aria-live': 'polite', 'aria-relevant': 'additions' },
    older,
    list,
  );
  const typingEl = h('div', { class: 'typing-line', 'data-testid': 'typing', 'aria-live': 'polite' });
  const input = h('textarea', {
    rows: '1',
    placeholder: 'Write a message…',
    'aria-label': 'Message',
    'data-testid': 'composer',
    enterkeyhint: 'send',
  });
  const sendBtn = h('button', { class: 'send-btn', type: 'submit', title: 'Send', 'aria-label': 'Send', 'data-testid': 'send' }, icon('send'));
  // Files: the attach button (or a drop, or a paste) adds them to the
  // tray, where they upload at once; the message goes when all are up.
  const fileInput = h('input', { type: 'file', multiple: true, hidden: true, 'data-testid': 'file-input' });
  const attachBtn = h(
    'button',
    { class: 'icon-btn attach-btn', type: 'button', title: 'Attach files', 'aria-label': 'Attach files', 'data-testid': 'attach', onclick: () => fileInput.click() },
    icon('clip'),
  );
  const tray = createTray(media.uploader, () => state.openId, () => {
    sendBtn.disabled = tray.busy();
  });
  fileInput.addEventListener('change', () => {
    tray.add([...fileInput.files]);
    fileInput.value = '';
  });
  const form = h('form', { class: 'composer' }, attachBtn, fileInput, input, sendBtn);
  // Said before sending: a text over chatd's body limit (told in the
  // CONNACK) would be refused too_large, for good.
  const tooLong = h('div', { class: 'composer-too-long', role: 'alert', 'data-testid': 'composer-too-long', hidden: true });
  const maxBody = () => (typeof sync.maxBodyBytes === 'function' ? sync.maxBodyBytes() : 0);
  /** Shows whether the composer's text is over the limit; true if it is. */
  const checkLength = () => {
    const n = charsOverLimit(input.value, maxBody());
    setText(tooLong, n ? tooLongText(n) : '');
    tooLong.hidden = !n;
    return n > 0;
  };
  // Replying to or editing a message: {kind, seq} while the banner shows.
  let mode = null;
  let draft = ''; // the composer's text before an edit, put back after it
  const drafts = composerDrafts(state.me);
  /** Keeps what the user was writing in the conversation shown (not an edit's text). */
  const keepDraft = () => {
    if (shownId) drafts.set(shownId, mode && mode.kind === 'edit' ? draft : input.value);
  };
  const banner = composerBanner(() => setMode(null));

  const el = h(
    'section',
    { class: 'chat', 'data-testid': 'conversation' },
    h(
      'header',
      { class: 'chat-head' },
      h('button', { class: 'icon-btn back', type: 'button', title: 'Back', 'aria-label': 'Back to conversations', 'data-testid': 'back', onclick: actions.back }, icon('back')),
      avatarSlot,
      h('div', { class: 'chat-title' }, titleEl, subtitleEl),
      addBtn,
      infoBtn,
    ),
    scroller,
    typingEl,
    tray.el,
    banner.el,
    tooLong,
    form,
  );
  el.addEventListener('dragover', (e) => {
    if (![...(e.dataTransfer?.types || [])].includes('Files')) return;
    e.preventDefault();
    el.classList.add('dropping');
  });
  el.addEventListener('dragleave', (e) => {
    if (e.target === el || !el.contains(e.relatedTarget)) el.classList.remove('dropping');
  });
  el.addEventListener('drop', (e) => {
    if (!e.dataTransfer?.files?.length) return;
    e.preventDefault();
    el.classList.remove('dropping');
    tray.add([...e.dataTransfer.files]);
  });
  input.addEventListener('paste', (e) => {
    const files = [...(e.clipboardData?.files || [])];
    if (files.length) {
      e.preventDefault();
      tray.add(files);
    }
  });

  let shownId = null;
  /** @type {{row:HTMLElement, id:string, close:()=>void}|null} the photo open full size, and its message's row */
  let viewer = null;
  /** @type {Map<string, {el:HTMLElement, update:(d:any)=>void}>} */
  let nodes = new Map();
  let stickToBottom = true;
  /** Sets stickToBottom, and tells the store: a conversation followed at its newest entries is trimmed as they come. */
  function follow(on) {
    stickToBottom = on;
    const c = state.conv(state.openId);
    if (c) c.atBottom = on;
  }

  const notify = actions.notify || (() => {});
  const send = () => {
    const cid = state.openId;
    const body = input.value;
    if (!cid) return;
    if (checkLength()) return;
    if (mode && mode.kind === 'edit') {
      // An edit changes the text alone: files stay as they were sent. The
      // text of a message with files may be cleared (chatd takes "" as a
      // send with files and no text); a text message needs some.
      const m = state.conv(cid)?.messages.get(mode.seq);
      if (body.trim()) saveEdit(cid, mode.seq, body);
      else if (m && m.attachments && m.attachments.length) saveEdit(cid, mode.seq, '');
      return;
    }
    if (tray.busy() || (!body.trim() && !tray.count())) return;
    const files = tray.take();
    const replyTo = mode && mode.kind === 'reply' ? mode.seq : 0;
    input.value = '';
    drafts.set(cid, '');
    autoGrow();
    follow(true);
    setMode(null);
    sync.send(cid, files.length ? body.trim() : body, { replyTo, attachments: files });
    input.focus();
  };

  function saveEdit(cid, seq, body) {
    const m = state.conv(cid)?.messages.get(seq);
    setMode(null);
    if (m && m.body === body) return; // unchanged: no entry for nothing
    sync.edit(cid, seq, body).catch((e) => notify(changeFailedText('edit', {}, e)));
  }

  /** Enters (or, with null, leaves) reply or edit mode for message m. */
  function setMode(next, m) {
    const wasEdit = mode && mode.kind === 'edit';
    mode = next;
    if (!next) {
      banner.show(null);
      if (wasEdit) {
        input.value = draft;
        draft = '';
        autoGrow();
      }
      return;
    }
    if (next.kind === 'edit') {
      if (!wasEdit) draft = input.value;
      input.value = m.body;
      banner.show({ kind: 'edit', m });
    } else {
      if (wasEdit) {
        input.value = draft;
        draft = '';
      }
      banner.show({ kind: 'reply', who: userName(m.senderId, state.me), m });
    }
    autoGrow();
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  // The banner and a growing composer shrink the message list: keep the
  // newest message in view when the list was at the bottom.
  new ResizeObserver(() => {
    if (stickToBottom) scroller.scrollTop = scroller.scrollHeight;
  }).observe(scroller);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  input.addEventListener('keydown', (e) => {
    // Enter sends, Shift+Enter is a new line; not while an IME composes,
    // nor the Enter that ends a composition, which Safari sends after
    // compositionend, isComposing false but keyCode 229 ("processed by
    // an IME").
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      send();
    } else if (e.key === 'Escape' && mode) {
      e.preventDefault();
      setMode(null);
    } else if (e.key === 'ArrowUp' && !input.value && !mode) {
      // As in most chat apps: Up in an empty composer edits your last message.
      const c = state.conv(state.openId);
      const last = c && c.visible().filter((m) => m.senderId === state.me && !m.recalled).at(-1);
      if (last && !last.forwardedFrom) {
        e.preventDefault();
        setMode({ kind: 'edit', seq: last.seq }, last);
      }
    }
  });
  input.addEventListener('input', () => {
    autoGrow();
    checkLength();
    if (!mode || mode.kind !== 'edit') keepDraft();
    if (state.openId && input.value.trim()) sync.typing(state.openId);
  });
  function autoGrow() {
    input.style.height = 'auto';
    input.style.height = Math.min(input.scrollHeight, 160) + 'px';
  }

  scroller.addEventListener('scroll', () => {
    follow(scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 60);
    if (scroller.scrollTop < 150) loadOlder();
  });

  async function loadOlder() {
    const c = state.conv(state.openId);
    if (!c || !c.hasOlder || c.loadingOlder) return;
    older.textContent = 'Loading earlier messages…';
    await sync.loadOlder(c.id);
  }

  /** Scrolls to message seq (loading older pages if needed) and flashes it. */
  async function jumpTo(seq) {
    const c = state.conv(state.openId);
    if (!c) return;
    // Another conversation opened while older pages came: its list must
    // not be searched for this seq.
    const here = () => state.openId === c.id;
    const was = stickToBottom;
    follow(false); // what is loaded for the message stays
    for (let i = 0; i < 40 && here() && !c.messages.has(seq) && c.hasOlder; i++) {
      await sync.loadOlder(c.id);
      render();
    }
    if (!here()) return;
    const target = list.querySelector(`.msg[data-seq="${seq}"]`);
    if (!target) {
      follow(was);
      notify('That message is no longer available.');
      return;
    }
    target.scrollIntoView({ block: 'center' });
    target.classList.remove('flash');
    void target.offsetWidth; // restart the animation on a second click
    target.classList.add('flash');
    setTimeout(() => target.classList.remove('flash'), 1600);
  }

  /** The actions menu of message m (committed, not recalled). */
  function openActions(btn, m) {
    const cid = state.openId;
    const c = state.conv(cid);
    if (!c || !m.seq || m.recalled) return;
    const mine = m.senderId === state.me;
    const role = c.myRole();
    const mayRecall = mine || (c.type === 'GROUP' && (role === 'owner' || role === 'admin'));
    const reacted = new Set((m.reactions || []).filter((r) => r.me).map((r) => r.emoji));
    openActionsMenu(btn, {
      mine,
      reacted,
      react: (emoji) => react(cid, m.seq, emoji, !reacted.has(emoji)),
      reply: () => setMode({ kind: 'reply', seq: m.seq }, m),
      // A forward copies the text and the files (the server makes the
      // copies).
      forward: async () => {
        const to = await pickConversation(state, snippet(m.body) || filesPreview(m));
        if (!to) return;
        try {
          await sync.forward(to, cid, m.seq);
          notify(to === cid ? 'Message forwarded.' : `Message forwarded to ${conversationTitle(state.conv(to))}.`);
        } catch (e) {
          notify(`Could not forward the message: ${e.message}`);
        }
      },
      // A forward shows another's words: it is not edited (chatd refuses).
      edit: mine && !m.forwardedFrom ? () => setMode({ kind: 'edit', seq: m.seq }, m) : null,
      recall: mayRecall
        ? async () => {
            if (!(await confirmRecall())) return;
            if (mode && mode.seq === m.seq) setMode(null);
            sync.recall(cid, m.seq).catch((e) => notify(changeFailedText('recall', {}, e)));
          }
        : null,
    });
  }

  // One reaction toggle in flight per message and emoji: a double click
  // must not set and remove in a race.
  const reacting = new Set();
  function react(cid, seq, emoji, on) {
    const key = `${cid}:${seq}:${emoji}`;
    if (reacting.has(key)) return;
    reacting.add(key);
    sync
      .react(cid, seq, emoji, on)
      .catch((e) => notify(changeFailedText('react', { on }, e)))
      .finally(() => reacting.delete(key));
  }

  /** Why a message was not sent, as the row shows it. */
  function failedReason(d) {
    if (d.tooLarge) return 'Too long to send. Edit puts the text back in the composer to shorten it.';
    return d.error || 'Not sent.';
  }

  /**
   * Puts a message refused as too long back in the composer (after what
   * is written there) and removes it from the list: it is sent again as a
   * new message once shortened.
   */
  function putBack(m) {
    const cid = state.openId;
    if (!cid) return;
    if (mode) setMode(null);
    input.value = input.value ? `${input.value}\n${m.body}` : m.body;
    keepDraft();
    sync.discard?.(cid, m.clientMsgId);
    autoGrow();
    checkLength();
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  /** One message row; update() refreshes the parts that can change. */
  function messageNode(m) {
    const bodyEl = h('span', { class: 'body', 'data-testid': 'message-body' }, m.body);
    const files = h('div', { class: 'files' });
    let shownFiles = '';
    let current = m; // the row's message as of the last update
    const life = lifecycleParts({
      jump: jumpTo,
      toggle: (emoji, on) => current.seq && react(state.openId, current.seq, emoji, on),
      openActions: (btn) => openActions(btn, current),
    });
    const body = h('div', { class: 'bubble' }, life.forwarded, files, bodyEl);
    const sender = h('div', { class: 'sender' });
    const time = h('time', null);
    const stateEl = h('span', { class: 'receipt', 'data-testid': 'receipt' });
    const retry = h(
      'button',
      { class: 'retry', type: 'button', 'data-testid': 'retry', onclick: () => sync.retry(state.openId, m.clientMsgId) },
      icon('retry'),
      'Retry',
    );
    // Refused for good as too long: no Retry, the text back to the
    // composer to shorten instead.
    const editFailed = h(
      'button',
      { class: 'retry', type: 'button', 'data-testid': 'edit-failed', hidden: true, onclick: () => putBack(current) },
      'Edit',
    );
    const reason = h('div', { class: 'failed-reason', 'data-testid': 'failed-reason', hidden: true });
    const meta = h('div', { class: 'meta' }, time, stateEl, retry, editFailed);
    const row = h('div', { class: 'bubble-row' }, body, life.actionsBtn);
    const el = h('div', { class: 'msg', 'data-testid': 'message', 'data-client-msg-id': m.clientMsgId }, sender, life.quote, row, life.reactions, reason, meta);
    meta.insertBefore(life.edited, stateEl);
    const openImage = (a) => {
      const v = { row: el, id: a.id, close: () => {} };
      viewer = v;
      v.close = openLightbox(a, media.cache, () => viewer === v && (viewer = null));
    };
    const update = (d) => {
      current = d.m;
      const recalled = !!d.m.recalled;
      el.classList.toggle('recalled', recalled);
      setText(bodyEl, recalled ? 'Message deleted' : d.m.body);
      life.update({ m: d.m, quote: d.quote, me: state.me, actionable: Boolean(d.seq) && !recalled });
      el.classList.toggle('mine', d.mine);
      el.classList.toggle('theirs', !d.mine);
      el.classList.toggle('run-start', d.runStart);
      el.classList.toggle('failed', d.status === 'failed');
      el.classList.toggle('pending', d.status === 'sending');
      el.dataset.status = d.status;
      if (d.seq) el.dataset.seq = String(d.seq);
      else delete el.dataset.seq;
      setText(sender, d.senderLabel);
      sender.hidden = !d.senderLabel;
      setText(time, d.runEnd ? clockTime(d.createdAt) : '');
      time.hidden = !d.runEnd;
      setText(stateEl, d.receipt);
      stateEl.hidden = !d.receipt;
      retry.hidden = d.status !== 'failed' || d.tooLarge;
      editFailed.hidden = !(d.status === 'failed' && d.tooLarge);
      // Shown, not only a tooltip: a phone cannot hover.
      setText(reason, d.status === 'failed' ? failedReason(d) : '');
      reason.hidden = d.status !== 'failed';
      // A recalled message's files are gone: the server answers 410 for
      // them. Rebuilt only when the files change (a thumbnail made later).
      const atts = recalled ? [] : d.m.attachments || [];
      const key = atts.map((a) => `${a.id}:${a.thumbnail ? 1 : 0}`).join(',');
      if (key !== shownFiles) {
        shownFiles = key;
        files.replaceChildren(...(atts.length ? [attachmentList(atts, media.cache, openImage)] : []));
        // Deleted for everyone while open full size: the photo goes too.
        if (viewer && viewer.row === el && !atts.some((a) => a.id === viewer.id)) viewer.close();
      }
      el.classList.toggle('has-files', atts.length > 0);
      bodyEl.hidden = atts.length > 0 && !d.m.body;
      meta.hidden = !d.runEnd && !d.receipt && d.status !== 'failed' && life.edited.hidden;
      el.title = d.error || '';
    };
    return { el, update };
  }

  /** A system entry: a centred notice ("Ann renamed the group"). */
  function systemNode() {
    const text = h('span', null);
    const el = h('div', { class: 'system', role: 'note', 'data-testid': 'system' }, text);
    return {
      el,
      update: (d) => {
        setText(text, d.text);
        el.dataset.seq = String(d.seq);
      },
    };
  }

  function dayNode(label) {
    const el = h('div', { class: 'day', role: 'separator' }, h('span', null, label));
    return { el, update: () => {} };
  }

  /** The rows to show, in order, with everything that affects rendering. */
  function rows(c) {
    const out = [];
    const group = c.type === 'GROUP';
    const lastOwn = c.lastOwnSeq();
    let prevDay = '', prevSender = null;
    const push = (key, kind, d) => out.push({ key, kind, d });
    const addDay = (iso) => {
      const label = dayLabel(iso);
      if (label && label !== prevDay) {
        push(`day:${label}`, 'day', label);
        prevDay = label;
        prevSender = null;
      }
    };
    for (const m of c.visible()) {
      addDay(m.createdAt);
      if (m.kind === 'system') {
        push(`sys:${m.seq}`, 'system', { seq: m.seq, text: systemText(m, state.me) });
        prevSender = null;
        continue;
      }
      const mine = m.senderId === state.me;
      let receipt = '';
      if (mine && m.seq === lastOwn) {
        const s = c.seen && c.seen.seq === m.seq ? c.seen : null;
        if (s && s.seenBy > 0) receipt = group ? `Seen by ${s.seenBy}` : 'Seen';
        else receipt = 'Sent';
      }
      push(m.clientMsgId ? `m:${m.clientMsgId}` : `seq:${m.seq}`, 'msg', {
        m,
        quote: quoteOf(c, m),
        mine,
        seq: m.seq,
        status: 'sent',
        receipt,
        createdAt: m.createdAt,
        runStart: prevSender !== m.senderId,
        senderLabel: group && !mine && prevSender !== m.senderId ? userName(m.senderId, state.me) : '',
      });
      prevSender = m.senderId;
    }
    for (const p of c.pendingList()) {
      addDay(p.createdAt);
      push(`m:${p.clientMsgId}`, 'msg', {
        m: { clientMsgId: p.clientMsgId, body: p.body, attachments: p.attachments, replyTo: p.replyTo },
        quote: p.replyTo ? quoteOf(c, { replyTo: p.replyTo }) : null,
        mine: true,
        seq: null,
        status: p.status === 'failed' ? 'failed' : 'sending',
        receipt: p.status === 'failed' ? 'Not sent' : 'Sending…',
        error: p.error,
        tooLarge: !!p.tooLarge,
        createdAt: p.createdAt,
        runStart: prevSender !== state.me,
        senderLabel: '',
      });
      prevSender = state.me;
    }
    // The time goes under the last message of a run: same sender, same
    // day, less than five minutes apart.
    for (let i = 0; i < out.length; i++) {
      const r = out[i];
      if (r.kind !== 'msg') continue;
      const next = out[i + 1];
      r.d.runEnd =
        !next ||
        next.kind !== 'msg' ||
        next.d.mine !== r.d.mine ||
        next.d.m.senderId !== r.d.m.senderId ||
        Math.abs(new Date(next.d.createdAt) - new Date(r.d.createdAt)) > 5 * 60000;
    }
    return out;
  }

  function renderMessages(c) {
    // Remember the first row on screen, to keep it still when older
    // messages are inserted above it (.messages is the offsetParent).
    let anchor = null, anchorTop = 0;
    if (!stickToBottom) {
      for (const child of list.children) {
        // Day separators are keyed by label and move; messages do not.
        if (child.classList.contains('msg') && child.offsetTop + child.offsetHeight > scroller.scrollTop) {
          anchor = child;
          anchorTop = child.offsetTop - scroller.scrollTop;
          break;
        }
      }
    }
    const want = rows(c);
    const next = new Map();
    want.forEach((r, i) => {
      let n = nodes.get(r.key);
      if (!n) n = r.kind === 'day' ? dayNode(r.d) : r.kind === 'system' ? systemNode() : messageNode(r.d.m);
      n.update(r.d);
      next.set(r.key, n);
      const at = list.children[i];
      if (at !== n.el) list.insertBefore(n.el, at || null);
    });
    for (const [k, n] of nodes) if (!next.has(k)) n.el.remove();
    nodes = next;

    // A load waiting to be retried (chatd busy) says so instead.
    const wait = state.waits.get(c.id);
    if (c.hasOlder) older.textContent = c.loadingOlder ? wait || 'Loading earlier messages…' : '';
    else older.textContent = c.loaded ? 'This is the beginning of the conversation.' : wait || 'Loading…';

    const focus = c.focusSeq && list.querySelector(`[data-seq="${c.focusSeq}"]`);
    if (focus) {
      // A search hit: in the middle of the screen, marked for a moment.
      c.focusSeq = 0;
      follow(false);
      focus.classList.add('hit');
      setTimeout(() => focus.classList.remove('hit'), 2500);
      scroller.scrollTop = Math.max(0, focus.offsetTop - scroller.clientHeight / 2);
    } else if (stickToBottom) scroller.scrollTop = scroller.scrollHeight;
    else if (anchor && anchor.isConnected) scroller.scrollTop = anchor.offsetTop - anchorTop;
    // A first page shorter than the screen cannot be scrolled up: load on.
    if (c.hasOlder && !c.loadingOlder && scroller.scrollHeight <= scroller.clientHeight + 150) loadOlder();
  }

  function render() {
    const c = state.conv(state.openId);
    if (!c) {
      // None open (Back, or the user was removed from it): what was open
      // about it (dialogs, panels, the photo viewer) would act on a
      // conversation no longer shown, or no longer theirs.
      leaveConversation();
      return;
    }
    if (shownId !== c.id) {
      // A different conversation: start from a clean list at the bottom,
      // with what the user was writing there before.
      keepDraft();
      shownId = c.id;
      nodes = new Map();
      list.replaceChildren();
      follow(true);
      mode = null;
      draft = '';
      banner.show(null);
      leaveConversation();
      input.value = drafts.get(c.id);
      tray.clear();
      // The uploads of this conversation a page before left unfinished.
      tray.restore();
      autoGrow();
      el.dataset.convId = String(c.id);
    }
    // The message being replied to or edited was deleted meanwhile.
    if (mode && c.messages.get(mode.seq)?.recalled) setMode(null);
    setText(titleEl, conversationTitle(c));
    avatarSlot.replaceChildren(avatar(c));
    const typing = c.typingUsers(Date.now());
    setText(typingEl, typingText(typing, state.me));
    let sub;
    if (c.type === 'DIRECT') sub = 'Direct message';
    else sub = c.members ? `${c.members.length} members` : 'Group';
    setText(subtitleEl, sub);
    const role = c.myRole();
    addBtn.hidden = !(c.type === 'GROUP' && (role === 'owner' || role === 'admin'));
    renderMessages(c);
  }

  function focus() {
    // Not on touch screens: the keyboard would cover the messages.
    if (window.matchMedia('(min-width: 700px)').matches) input.focus();
  }

  /** Signing out: uploads in the tray stop, their previews are freed. */
  function dispose() {
    tray.clear();
    drafts.clear();
  }

  return { el, render, focus, dispose };
}
