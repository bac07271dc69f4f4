// Attachments on screen: in a message (image previews that open full
// size, an audio player for voice notes, file chips), the composer's tray
// of files being uploaded (progress, retry, remove) and the full-size
// viewer. Names and captions are text nodes like every user string.

import { h, icon, setText } from './dom.js';
import { fileType, refusedForGood, sameFile, shownAsPicture } from '../uploads.js';
import { waitText } from '../api.js';
import { aboutOpenConversation } from './lifecycle.js';

export function formatSize(n) {
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MB`;
  if (n >= 1 << 10) return `${Math.round(n / (1 << 10))} KB`;
  return `${n} B`;
}

function duration(ms) {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/** Saves a blob URL under a name (the browser's download). */
function save(url, name) {
  const a = h('a', { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
}

/**
 * The attachments of one message. cache: BlobCache; openImage(att) shows
 * one full size.
 */
export function attachmentList(atts, cache, openImage) {
  return h(
    'div',
    { class: 'attachments', 'data-testid': 'attachments' },
    atts.map((a) => {
      let kind = (a.contentType || '').split('/')[0];
      if (kind === 'image' && !shownAsPicture(a)) kind = 'file';
      let node;
      if (kind === 'image') node = imageNode(a, cache, openImage);
      else if (kind === 'audio') node = audioNode(a, cache);
      else node = fileChip(a, cache);
      return h('figure', { class: `att att-${kind === 'image' || kind === 'audio' ? kind : 'file'}`, dataset: { attachmentId: a.id } }, node, a.caption ? h('figcaption', null, a.caption) : null);
    }),
  );
}

function imageNode(a, cache, openImage) {
  // The thumbnail's (or the image's) size reserves the space before the
  // bytes arrive, so the list does not jump.
  const t = a.thumbnail;
  const w = t ? t.width : Math.min(a.width || 240, 320);
  const hgt = t ? t.height : a.width ? Math.round((a.height * w) / a.width) : 180;
  const img = h('img', { alt: a.name, width: w, height: hgt, 'data-testid': 'attachment-image', loading: 'lazy' });
  cache.url(a.id, Boolean(t)).then(
    (u) => (img.src = u),
    () => img.classList.add('broken'),
  );
  return h('button', { class: 'att-image', type: 'button', title: `${a.name} — open full size`, onclick: () => openImage(a) }, img);
}

function audioNode(a, cache) {
  const player = h('audio', { controls: true, preload: 'metadata', 'data-testid': 'attachment-audio' });
  cache.url(a.id).then(
    (u) => (player.src = u),
    () => player.classList.add('broken'),
  );
  return h(
    'div',
    { class: 'att-audio-row' },
    icon('mic'),
    player,
    h('span', { class: 'att-meta' }, a.durationMs ? duration(a.durationMs) : formatSize(a.size)),
  );
}

function fileChip(a, cache) {
  return h(
    'button',
    {
      class: 'file-chip',
      type: 'button',
      'data-testid': 'attachment-file',
      title: `Download ${a.name}`,
      onclick: () => cache.url(a.id).then((u) => save(u, a.name), () => {}),
    },
    icon('file'),
    h('span', { class: 'file-name' }, a.name),
    h('span', { class: 'att-meta' }, formatSize(a.size)),
  );
}

/**
 * The full-size viewer: click, Escape or the close button leave it. It
 * takes the focus (keys act on it, not on the page under it) and gives it
 * back when closed; another conversation opened underneath closes it, as
 * the dialogs about the open conversation. Returns the function that
 * closes it; onClose is called when it closes, however.
 */
export function openLightbox(a, cache, onClose = () => {}) {
  const img = h('img', { alt: a.name, 'data-testid': 'lightbox-image' });
  const prevFocus = document.activeElement;
  const close = () => {
    if (!el.isConnected) return;
    forget();
    el.remove();
    document.removeEventListener('keydown', onKey);
    if (prevFocus && prevFocus.isConnected && prevFocus.focus) prevFocus.focus();
    onClose();
  };
  const onKey = (e) => e.key === 'Escape' && close();
  const closeBtn = h('button', { class: 'icon-btn lightbox-close', type: 'button', 'aria-label': 'Close', 'data-testid': 'lightbox-close', onclick: close }, icon('close'));
  const el = h(
    'div',
    { class: 'lightbox', role: 'dialog', 'aria-modal': 'true', 'aria-label': a.name, 'data-testid': 'lightbox', onclick: (e) => e.target === el && close() },
    closeBtn,
    img,
    h('div', { class: 'lightbox-caption' }, a.caption || a.name, a.width ? ` · ${a.width}×${a.height}` : ''),
  );
  const forget = aboutOpenConversation(close);
  document.addEventListener('keydown', onKey);
  document.body.appendChild(el);
  closeBtn.focus();
  cache.url(a.id).then(
    (u) => (img.src = u),
    () => setText(el.querySelector('.lightbox-caption'), 'The image could not be loaded.'),
  );
  return close;
}

/**
 * The composer's files: each uploads as soon as it is added, with a
 * progress bar, or "chatd is busy, retrying in N s" while a step waits
 * out chatd's Retry-After (status waiting, see Uploader.send); a failed
 * one can be retried or removed, or only removed
 * when chatd refused it for good (refusedForGood: the user left, was
 * removed or blocked, or the file is too large or of a type chatd does
 * not take), which it says. onChange is called
 * whenever what can be sent changes.
 * With the uploader's tickets kept (Uploader tickets, UploadTickets), an
 * upload outlives the page: the tray keeps where each stands, and a file
 * picked again for the conversation after a reload goes on with its
 * upload (see Uploader.send). The uploads of the conversation it knows of
 * but holds no file for (the page was reloaded or the conversation left
 * meanwhile) are shown by restore(), each saying to pick the file again,
 * with a Remove that forgets it. A kept upload another tab holds
 * (UploadTickets.claim) is not taken: the file is uploaded anew, and not
 * kept; nor is it shown, nor forgotten by a Remove here. Remove, a refusal for good and a send
 * (take) forget an upload; clear() (another conversation, signing out)
 * stops the uploads and keeps them.
 * @param {import('../uploads.js').Uploader} uploader
 * @param {() => number|null} convId
 */
export function createTray(uploader, convId, onChange) {
  const el = h('div', { class: 'tray', 'data-testid': 'tray', hidden: true });
  /** @type {{file:File, cid:number, status:string, error:string, final:boolean, attachment:any, el:HTMLElement, bar:HTMLElement, stateEl:HTMLElement, handle:any, preview:string|null}[]} */
  let items = [];
  const kept = uploader.tickets ?? null;
  /** @type {{cid:number, file:any, el:HTMLElement}[]} uploads kept from before, waiting for their file */
  let waiting = [];
  // restore()s begun, so that one answered after a clear() shows nothing.
  let restores = 0;

  function render() {
    el.hidden = items.length === 0 && waiting.length === 0;
    onChange();
  }

  function start(it) {
    it.status = 'uploading';
    it.error = '';
    it.final = false;
    // The previous attempt's ticket and its key, if any: see Uploader.send.
    it.handle = { ticket: it.handle?.ticket, ticketKey: it.handle?.ticketKey };
    if (it.kept) it.handle.onTicket = (t, key) => kept.keep(it.cid, it.file, t, key);
    // A step waiting to be sent again (chatd busy) says so; Remove ends it.
    it.handle.onWait = (s, err) => {
      it.status = s ? 'waiting' : 'uploading';
      paint(it, 0);
      if (s) setText(it.stateEl, waitText(s, err));
    };
    paint(it, 0);
    uploader
      .upload(it.cid, it.file, (sent, total) => paint(it, total ? sent / total : 0), it.handle)
      .then((a) => {
        it.status = 'done';
        it.attachment = a;
        paint(it, 1);
      })
      .catch((e) => {
        if (e.code === 'aborted') return;
        it.status = 'failed';
        it.error = e.message;
        it.final = refusedForGood(e);
        paint(it, 0);
      })
      .finally(render);
  }

  function paint(it, frac) {
    it.el.dataset.status = it.status;
    it.bar.style.transform = `scaleX(${Math.max(0, Math.min(1, frac))})`;
    setText(it.stateEl, it.status === 'failed' ? it.error || 'Upload failed' : it.status === 'done' ? formatSize(it.file.size) : `${Math.round(frac * 100)}%`);
    it.el.querySelector('.tray-retry').hidden = it.status !== 'failed' || it.final;
    render();
  }

  function add(files) {
    const cid = convId();
    if (!cid) return;
    for (const file of files) {
      if (items.length >= 10) break; // a message carries at most 10
      const preview = shownAsPicture({ contentType: fileType(file) }) ? URL.createObjectURL(file) : null;
      const bar = h('span', { class: 'tray-bar' });
      const stateEl = h('span', { class: 'att-meta', 'data-testid': 'tray-state' });
      // Kept across a reload, and picked up from before it, unless the
      // tray holds the same file already (that one is the kept upload) or
      // another tab does (claim): this one is then an upload of its own.
      const keep = Boolean(kept) && !items.some((x) => x.keeps && x.cid === cid && sameFile(x.file, file));
      for (const w of waiting.filter((w) => w.cid === cid && sameFile(w.file, file))) unwait(w);
      const it = { file, cid, keeps: keep, kept: false, status: 'uploading', error: '', final: false, attachment: null, bar, stateEl, handle: {}, preview, el: null };
      it.el = h(
        'div',
        { class: 'tray-item', 'data-testid': 'tray-item' },
        preview ? h('img', { class: 'tray-thumb', src: preview, alt: '' }) : h('span', { class: 'tray-thumb' }, icon('file')),
        h('span', { class: 'tray-text' }, h('span', { class: 'file-name' }, file.name), stateEl, h('span', { class: 'tray-track' }, bar)),
        h('button', { class: 'retry tray-retry', type: 'button', 'data-testid': 'tray-retry', hidden: true, onclick: () => start(it) }, icon('retry'), 'Retry'),
        h('button', { class: 'icon-btn tray-remove', type: 'button', 'aria-label': `Remove ${file.name}`, 'data-testid': 'tray-remove', onclick: () => remove(it) }, icon('close')),
      );
      items.push(it);
      el.appendChild(it.el);
      if (!keep) {
        start(it);
        continue;
      }
      paint(it, 0);
      kept.claim(cid, file).then((release) => {
        if (it.dropped) return release?.();
        if (release) {
          it.kept = true;
          it.release = release;
          const before = kept.find(cid, file);
          if (before) it.handle = { ticket: before.ticket, ticketKey: before.ticketKey };
        }
        start(it);
      });
    }
    render();
  }

  /** Stops the upload of it and takes it off the tray; its ticket stays kept. */
  function drop(it) {
    it.dropped = true;
    it.handle.abort?.();
    it.release?.();
    it.el.remove();
    if (it.preview) URL.revokeObjectURL(it.preview);
    items = items.filter((x) => x !== it);
    render();
  }

  /** The user's Remove: the upload is cancelled, its ticket forgotten. */
  function remove(it) {
    if (it.kept) kept.forget(it.cid, it.file);
    drop(it);
  }

  function unwait(w) {
    w.el.remove();
    waiting = waiting.filter((x) => x !== w);
  }

  /**
   * Shows the kept uploads of the conversation the tray holds no file of:
   * the page that had the file is gone, and picking it again resumes. An
   * upload another live page of the browser claims (UploadTickets.claim:
   * going on there, or in its tray unsent) is that page's, and not shown.
   * Resolves once they are shown.
   */
  function restore() {
    const cid = convId();
    if (!kept || !cid) return Promise.resolve();
    const shows = (e) => e.cid === cid && !waiting.some((w) => w.cid === cid && sameFile(w.file, e.file)) && !items.some((x) => x.cid === cid && sameFile(x.file, e.file));
    const entries = kept.list().filter(shows);
    if (!kept.locks) {
      show(cid, entries);
      return Promise.resolve();
    }
    const at = ++restores;
    return Promise.all(entries.map((e) => kept.claimed(cid, e.file))).then((claimed) => {
      // Cleared (another conversation, signing out) or restored again meanwhile.
      if (at !== restores || convId() !== cid) return;
      show(
        cid,
        entries.filter((e, i) => !claimed[i] && shows(e)),
      );
    });
  }

  /** Shows entries of conversation cid as waiting for their file. */
  function show(cid, entries) {
    for (const e of entries) {
      const w = { cid, file: e.file, el: null };
      w.el = h(
        'div',
        { class: 'tray-item', 'data-testid': 'tray-waiting', 'data-status': 'waiting-file' },
        h('span', { class: 'tray-thumb' }, icon('file')),
        h(
          'span',
          { class: 'tray-text' },
          h('span', { class: 'file-name' }, e.file.name),
          h('span', { class: 'att-meta', 'data-testid': 'tray-waiting-state' }, `Not sent: pick the file again to resume (${formatSize(e.file.size)})`),
        ),
        h(
          'button',
          {
            class: 'icon-btn tray-remove',
            type: 'button',
            'aria-label': `Forget ${e.file.name}`,
            'data-testid': 'tray-waiting-remove',
            onclick: () => {
              unwait(w);
              render();
              // Taken up since by another tab (its file picked there): that tab's to forget.
              kept.forgetUnclaimed(cid, e.file);
            },
          },
          icon('close'),
        ),
      );
      waiting.push(w);
      el.appendChild(w.el);
    }
    render();
  }

  return {
    el,
    add,
    /** Files are waiting: the message waits for them. */
    busy: () => items.some((it) => it.status !== 'done'),
    count: () => items.length,
    restore,
    /** The uploads to send, in order, and clears the tray of them: a message carries them, and their tickets are forgotten. */
    take() {
      const out = items.map((it) => it.attachment);
      for (const it of items) {
        it.el.remove();
        if (it.preview) URL.revokeObjectURL(it.preview);
        if (it.kept) kept.forget(it.cid, it.file);
        it.dropped = true;
        it.release?.();
      }
      items = [];
      render();
      return out;
    },
    /** Stops every upload and empties the tray; their tickets stay kept (restore shows them). */
    clear() {
      for (const it of [...items]) drop(it);
      for (const w of [...waiting]) unwait(w);
      restores++;
      render();
    },
  };
}
