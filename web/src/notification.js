// What a conversation's notification shows, and how a recall or an edit
// of one of its messages changes it: one rule for the notifications the
// service worker shows from pushes (src/sw.js, a remove or an update
// push) and those the page shows itself while hidden (src/push.js,
// message.recalled and message.edited), both under the same tag.

/** chatd's title without a group's: the count in words (docs/events.md). */
export const countTitle = (count) => (count > 1 ? `${count} new messages` : 'New message');

/**
 * The title and body of a notification of count messages: its title, and
 * the newest message's text (preview), else the count in words.
 */
export function present(title, count, preview) {
  let body = preview || countTitle(count);
  if (body === title) body = 'Open the conversation to read it.';
  return { title: title || 'chatd', body };
}

/**
 * Whether registration reg shows, under tag, user userId's notification
 * (one naming no user counts as theirs) of message seq or of a newer one
 * of the conversation, or showed one (noteShown, in caches: the Cache
 * Storage; absent, only what is on screen counts). A push the push
 * service delivered late or twice (it keeps no order, and retries), or a
 * message the page gets again after a push showed it while the page's
 * connection was down (the reconnect's replay, still news by the page's
 * clock), is then not shown: it would alert a second time for what the
 * user was told already, or put an older message in place of a newer
 * one. What was shown counts after its notification went too: a recall
 * closed it (shown again, it would show the recalled message) or the
 * user dismissed it.
 */
export async function shownAlready(reg, tag, userId, seq, caches) {
  for (const x of await reg.getNotifications({ tag })) {
    const d = x.data || {};
    if ((d.userId === undefined || userId === undefined || d.userId === userId) && Number.isInteger(d.seq) && d.seq >= seq) return true;
  }
  return userId !== undefined && (await lastShown(caches, userId, tag)) >= seq;
}

// The newest message seq a notification was shown for, per user and tag,
// in the Cache Storage the page and the service worker share: what is on
// screen forgets a notification once it is closed. Read and written under
// the notifications' Web Lock (src/sw.js, src/push.js), so the newest is
// kept.
const SHOWN_CACHE = 'chatd-shown';
const shownKey = (userId, tag) => `/chatd-shown/${encodeURIComponent(userId)}/${encodeURIComponent(tag)}`;

async function lastShown(caches, userId, tag) {
  try {
    const r = caches && (await (await caches.open(SHOWN_CACHE)).match(shownKey(userId, tag)));
    const seq = r ? Number(await r.text()) : 0;
    return Number.isInteger(seq) ? seq : 0;
  } catch {
    return 0;
  }
}

/**
 * Forgets in caches what was shown (noteShown), to every user but keep
 * (none kept when it is null or absent): at sign-out, and at sign-in for
 * users who left without signing out here (a token that expired while the
 * browser was closed). Which conversations notified, and up to which
 * message, is the user's, not the next one's at this browser to find
 * there.
 */
export async function forgetShown(caches, keep = null) {
  try {
    if (!caches) return;
    if (keep === null) {
      await caches.delete(SHOWN_CACHE);
      return;
    }
    const c = await caches.open(SHOWN_CACHE);
    const kept = shownKey(keep, '');
    for (const r of await c.keys()) if (!new URL(r.url).pathname.startsWith(kept)) await c.delete(r);
  } catch {
    // Kept: it holds conversation ids and seqs, no text.
  }
}

/** Records in caches that user userId was shown message seq under tag (shownAlready). */
export async function noteShown(caches, tag, userId, seq) {
  if (!caches || userId === undefined || !Number.isInteger(seq) || seq <= (await lastShown(caches, userId, tag))) return;
  try {
    await (await caches.open(SHOWN_CACHE)).put(shownKey(userId, tag), new Response(String(seq)));
  } catch {
    // Not recorded: a push delivered again after the notification went may alert again.
  }
}

/**
 * Takes recalled messages seqs out of notification x of registration reg.
 * x.data is what showed it set: seq (the newest message), count (of the
 * messages it stands for), title (as given, before present) and text
 * (whether it shows message seq's text). It is closed when it stood for
 * those messages alone (or for an unknown count), else shown again,
 * silently, with the messages left, without the text when it was a
 * recalled message's. The same recall again (a remove push sent once
 * more, a replay) changes nothing more.
 */
export async function removeMessages(reg, x, seqs) {
  const d = x.data || {};
  const recalled = Array.isArray(d.recalled) ? d.recalled : [];
  const gone = [...new Set(seqs)].filter((s) => !recalled.includes(s));
  if (gone.length === 0) return;
  if (!(d.count > gone.length)) {
    x.close();
    return;
  }
  const count = d.count - gone.length;
  const text = Boolean(d.text) && !gone.includes(d.seq);
  // Titled by its count (no group title): by what is left now.
  const title = d.title === countTitle(d.count) ? countTitle(count) : d.title;
  // The text as shown now: the page puts an edit's in (src/push.js showEdited).
  const shown = present(title, count, text ? x.body : '');
  await reg.showNotification(shown.title, {
    body: shown.body,
    tag: x.tag,
    renotify: false,
    silent: true,
    icon: x.icon,
    data: { ...d, count, text, recalled: [...recalled, ...gone] },
  });
}

/**
 * Shows the edited text of message seq in notification x of registration
 * reg, silently (it replaces x under the same tag), when x shows that
 * message's text (x.data: seq, text): what the edit fixed or took out is
 * not left on the screen. A text cleared (a photo's caption) leaves what
 * a message without text shows. A notification of another message, or
 * of a count without text, is left as it is. edit is the seq of the edit
 * text is of (an update push's editSeq, a message.edited event's seq):
 * x keeps it (x.data.edit), and a text of the same or an older edit than
 * the one x shows is not put back (push services keep no order between
 * updates); without one it is shown as before.
 *
 * The page's notification of a message already edited when its
 * message.new was encoded (a replay after a reconnect, a relay that
 * lagged) shows that edit's text, but the event tells only its time
 * (editedAt), not its seq: x.data.editedAt without an edit. The events of
 * the edits before it, then its own, come after it in seq order, each
 * with its editedAt (the page's message.edited): one of an earlier time
 * is of an older edit and changes nothing; the one of that time gives x
 * its seq, which an update push is then compared with. (Set back between
 * two edits, chatd's clock can give the older the later time: its text
 * then shows until the next event's.)
 */
export async function replaceText(reg, x, seq, text, edit, editedAt) {
  const d = x.data || {};
  if (d.seq !== seq || !d.text) return;
  const known = Number.isInteger(edit);
  if (known && Number.isInteger(d.edit) && edit <= d.edit) return;
  // Not knowing its edit yet, x shows an edit of a later time than an
  // older one's (and the same as its own, shown again with its seq).
  if (known && !Number.isInteger(d.edit) && d.editedAt && compareTimes(editedAt, d.editedAt) < 0) return;
  const data = known ? { ...d, edit } : d;
  await reg.showNotification(x.title, { body: text || countTitle(1), tag: x.tag, renotify: false, silent: true, icon: x.icon, data });
}

/**
 * The order of RFC 3339 times a and b (-1, 0, 1) to the digit chatd
 * writes (microseconds, which Date.parse drops); NaN when either is not
 * one.
 */
function compareTimes(a, b) {
  const x = instant(a), y = instant(b);
  if (!x || !y) return NaN;
  if (x.s !== y.s) return x.s < y.s ? -1 : 1;
  return x.frac === y.frac ? 0 : x.frac < y.frac ? -1 : 1;
}

function instant(t) {
  const m = typeof t === 'string' && /^(.+T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/i.exec(t);
  const s = m ? Date.parse(m[1] + m[3]) : NaN;
  return Number.isFinite(s) ? { s, frac: (m[2] || '').padEnd(9, '0').slice(0, 9) } : null;
}
