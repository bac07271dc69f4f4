// Presentation helpers shared by the views. chatd has no user profiles, so
// people are shown by id; the avatar colour is derived from the id so the
// same person looks the same everywhere.

import { h } from './dom.js';

export function userName(uid, me) {
  return uid === me ? 'You' : `User ${uid}`;
}

export function conversationTitle(c) {
  if (c.type === 'DIRECT') {
    const peer = c.peerId();
    return peer ? `User ${peer}` : 'Direct message';
  }
  return c.title || `Group ${c.id}`;
}

const PALETTE = ['#2563eb', '#7c3aed', '#db2777', '#ea580c', '#16a34a', '#0891b2', '#4f46e5', '#ca8a04'];

export function avatar(c, size = '') {
  let label, seed;
  if (c.type === 'DIRECT') {
    const peer = c.peerId();
    label = peer ? String(peer) : '?';
    seed = peer || 0;
  } else {
    const t = (c.title || '').trim();
    // First letters of up to two words; Array.from keeps emoji whole.
    label = t ? t.split(/\s+/).slice(0, 2).map((w) => Array.from(w)[0]).join('').toUpperCase() : '#';
    seed = c.id;
  }
  return userAvatar(label, seed, size, c.type === 'GROUP');
}

export function userAvatar(label, seed, size = '', square = false) {
  const el = h('span', { class: `avatar ${size} ${square ? 'square' : ''}`.trim(), 'aria-hidden': 'true' }, label.length > 3 ? label.slice(-3) : label);
  el.style.setProperty('--avatar-bg', PALETTE[Math.abs(Number(seed)) % PALETTE.length]);
  return el;
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
