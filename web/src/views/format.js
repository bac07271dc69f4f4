// Presentation helpers shared by the views. People are shown by their
// display name and avatar (store/people.js), falling back to "User <id>"
// until their profile is known or when they never set one; the avatar
// colour is derived from the id so the same person looks the same
// everywhere.

import { h } from './dom.js';

/** @type {import('../store/people.js').People|null} */
let people = null;

/** Names and avatars come from p from now on. */
export function usePeople(p) {
  people = p;
}

/** @type {import('../uploads.js').BlobCache|null} */
let blobs = null;

/** Avatars chatd keeps are fetched through cache from now on. */
export function useBlobs(cache) {
  blobs = cache;
}

/**
 * The upload id of an avatar chatd keeps: its download path,
 * /v1/attachments/{id} (docs/http.md "Avatars"); null for an https
 * address.
 */
export function keptAvatar(url) {
  const m = /^\/v1\/attachments\/([a-z2-7]{26})$/.exec(url || '');
  return m ? m[1] : null;
}

export function userName(uid, me) {
  if (uid === me) return 'You';
  return people ? people.name(uid) : `User ${uid}`;
}

/** The name even for oneself (profile cards, the sidebar). */
export function displayName(uid) {
  return people ? people.name(uid, { you: false }) : `User ${uid}`;
}

export function conversationTitle(c) {
  if (c.type === 'DIRECT') {
    const peer = c.peerId();
    return peer ? displayName(peer) : 'Direct message';
  }
  return c.title || `Group ${c.id}`;
}

const PALETTE = ['#2563eb', '#7c3aed', '#db2777', '#ea580c', '#16a34a', '#0891b2', '#4f46e5', '#ca8a04'];

export function avatar(c, size = '') {
  if (c.type === 'DIRECT') {
    const peer = c.peerId();
    return peer ? personAvatar(peer, size) : userAvatar('?', 0, size);
  }
  const t = (c.title || '').trim();
  return userAvatar(initials(t) || '#', c.id, size, true, c.avatarUrl);
}

/**
 * All that avatar(c) shows depends on, as a string: equal keys, equal
 * avatars (the inbox keeps a row while its key stays).
 */
export function avatarKey(c) {
  if (c.type !== 'DIRECT') return JSON.stringify(['group', c.id, c.title || '', c.avatarUrl || null]);
  const peer = c.peerId();
  return peer ? personAvatarKey(peer) : 'nobody';
}

/** All that personAvatar(uid) shows depends on, as avatarKey. */
export function personAvatarKey(uid) {
  return JSON.stringify(['person', uid, people ? people.name(uid, { you: false }) : '', (people && people.avatar(uid)) || null]);
}

/** First letters of up to two words; Array.from keeps emoji whole. */
function initials(name) {
  return name ? name.split(/\s+/).slice(0, 2).map((w) => Array.from(w)[0]).join('').toUpperCase() : '';
}

/** A person's avatar: their picture, else their initials, else their id. */
export function personAvatar(uid, size = '') {
  const name = people ? people.name(uid, { you: false }) : '';
  const label = name && !name.startsWith('User ') ? initials(name) : String(uid);
  const url = people && people.avatar(uid);
  // A released avatar: the profile this page holds is stale (a member of
  // a large group gets no profile.updated); ask for it again.
  return userAvatar(label, uid, size, false, url, () => people.stale(uid, url));
}

/** onGone: the avatar chatd kept was released (410). */
export function userAvatar(label, seed, size = '', square = false, url = null, onGone = null) {
  const el = h('span', { class: `avatar ${size} ${square ? 'square' : ''}`.trim(), 'aria-hidden': 'true' }, label.length > 3 ? label.slice(-3) : label);
  el.style.setProperty('--avatar-bg', PALETTE[Math.abs(Number(seed)) % PALETTE.length]);
  const kept = keptAvatar(url);
  if (url && (/^https:\/\//.test(url) || (kept && blobs))) {
    // The initials stay underneath until the picture loads (or fails).
    const img = h('img', { alt: '', referrerpolicy: 'no-referrer', loading: 'lazy', decoding: 'async' });
    img.addEventListener('error', () => img.remove());
    if (kept) {
      // chatd's own, fetched with the token like an image attachment
      // (BlobCache.avatar: once, not at every render, when it is gone).
      blobs.avatar(kept).then(
        (u) => (img.src = u),
        (e) => {
          img.remove();
          if (e?.status === 410 && onGone) onGone();
        },
      );
    } else {
      img.src = url;
    }
    el.appendChild(img);
  }
  return el;
}

/** What a system entry says, for people ("Ann renamed the group to ..."). */
export function systemText(m, me) {
  const actor = userName(m.actorId, me);
  // "you" inside a sentence, "You" at its start.
  const user = m.userId === me ? 'you' : userName(m.userId, me);
  const User = m.userId === me ? 'You' : user;
  switch (m.action) {
    case 'group.updated': {
      const parts = [];
      if (m.title !== undefined) parts.push(`renamed the group to “${m.title}”`);
      if (m.about !== undefined) parts.push('changed the description');
      if (m.avatar !== undefined) parts.push(m.avatar ? 'changed the group picture' : 'removed the group picture');
      if (m.historyVisible === 'all') parts.push('let new members read the whole history');
      if (m.historyVisible === 'joined') parts.push('let new members read from when they join');
      return `${actor} ${parts.join(' and ') || 'changed the group'}`;
    }
    case 'member.added':
      return m.role === 'admin' ? `${actor} added ${user} as an admin` : `${actor} added ${user}`;
    case 'member.removed':
      return `${actor} removed ${user}`;
    case 'member.left':
      return `${User} left`;
    case 'role.changed':
      return m.role === 'admin' ? `${actor} made ${user} an admin` : `${actor} made ${user} a member`;
    case 'owner.changed':
      return `${User} now own${m.userId === me ? '' : 's'} the group` + (m.actorId === m.userId ? '' : ` (from ${actor})`);
    default:
      return `${actor} changed the group`;
  }
}

/** "14:05" today, "Mon" this week, else "12 Mar". */
export function shortTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const days = (now - d) / 86400000;
  if (days < 6) return d.toLocaleDateString([], { weekday: 'short' });
  return d.toLocaleDateString([], { day: 'numeric', month: 'short' });
}

export function clockTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** "Today", "Yesterday" or a date, for separators in the message list. */
export function dayLabel(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const today = new Date();
  const y = new Date(today);
  y.setDate(today.getDate() - 1);
  if (d.toDateString() === today.toDateString()) return 'Today';
  if (d.toDateString() === y.toDateString()) return 'Yesterday';
  return d.toLocaleDateString([], { weekday: 'long', day: 'numeric', month: 'long' });
}

export function typingText(users, me) {
  const names = users.map((u) => userName(u, me));
  if (!names.length) return '';
  if (names.length === 1) return `${names[0]} is typing…`;
  if (names.length === 2) return `${names[0]} and ${names[1]} are typing…`;
  return `${names.length} people are typing…`;
}

/**
 * How many characters (code points) to take off the end of text for it to
 * fit limit bytes of UTF-8, the unit of chatd's body limit; 0 when it fits
 * or no limit is known. Users count characters, not bytes: "é" is two
 * bytes, an emoji four.
 */
export function charsOverLimit(text, limit) {
  if (!limit) return 0;
  const enc = new TextEncoder();
  let over = enc.encode(text).length - limit;
  if (over <= 0) return 0;
  const chars = [...text];
  let n = 0;
  while (over > 0 && n < chars.length) {
    over -= enc.encode(chars[chars.length - 1 - n]).length;
    n++;
  }
  return n;
}

/** What the composer says of a text n characters over the body limit. */
export function tooLongText(n) {
  return `Too long to send: shorten it by ${n} character${n === 1 ? '' : 's'}.`;
}

/**
 * What stands for a message without text (a photo, voice note or file
 * sent without a caption) where its text would show: the inbox preview, a
 * reply's quote.
 */
export function msgTypeLabel(msgType) {
  return { image: '📷 Photo', audio: '🎤 Voice message', video: '🎬 Video', file: '📎 File' }[msgType] || '';
}
