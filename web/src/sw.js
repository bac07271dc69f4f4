// chatd's service worker: Web Push notifications. A push is only a
// wake-up ({"type":"message","userId","conversationId","seq","senderId",
// "count","badge","title","body"}; body only when the server sends
// previews); the
// page fetches the messages itself when it opens. {"type":"remove",
// "conversationId","seq","seqs","badge"} follows when messages a
// notification stood for were recalled (seqs; without it, seq alone, the
// newest): they leave the conversation's notification,
// shown again silently with the rest, or closed when they were the last (src/notification.js, the page's rule too).
// {"type":"update","conversationId","seq","editSeq","body","badge"}
// follows when message seq, whose text a notification shows, was edited:
// the notification shows body instead, silently (the same rule as the
// page's for message.edited), unless the text it shows is of that edit
// or a newer one (editSeq; a message push's editSeq when it previews an
// edited text): push services may deliver two updates out of order.
// Built into static/sw.js by build.sh.

import { noteShown, present, removeMessages, replaceText, shownAlready } from './notification.js';

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

function wait(event, p) {
  try {
    event.waitUntil(p);
  } catch {
    // An event dispatched by script (tests) cannot be extended.
  }
  return p;
}

// Pushes are handled one after the other, and under the Web Lock the
// page takes for its own reads and shows (src/push.js): Chromium's
// getNotifications() deletes from its database each stored notification
// the platform does not yet report on screen, so a read made while a
// notification is still being shown loses it for good. A remove push read
// during a message push's show would leave the recalled text on screen; a
// page's sign-out read during it, the signed-out user's message.
const NOTIFICATIONS_LOCK = 'chatd-notifications';
let handling = Promise.resolve();
function serially(fn) {
  const turn = self.navigator.locks ? () => self.navigator.locks.request(NOTIFICATIONS_LOCK, fn) : fn;
  const run = handling.then(turn);
  handling = run.catch(() => {});
  return run;
}

// Who is signed in at this browser, as the page records it (src/push.js
// rememberSignIn): undefined when no page of this version recorded it
// yet, null when no one is.
const SIGNED_IN_CACHE = 'chatd-signed-in';
const SIGNED_IN_KEY = '/chatd-signed-in';
async function signedIn() {
  try {
    const r = self.caches && (await (await self.caches.open(SIGNED_IN_CACHE)).match(SIGNED_IN_KEY));
    return r ? (await r.json()).userId : undefined;
  } catch {
    return undefined;
  }
}

self.addEventListener('push', (event) => {
  let n = {};
  try {
    n = event.data ? event.data.json() : {};
  } catch {
    n = {};
  }
  const tag = `conv-${n.conversationId}`;
  wait(
    event,
    serially(async () => {
      // A push for a user who signed out (delivered after the sign-out
      // read the notifications to close them), or for the one signed in
      // before whoever is now (their subscription kept): not shown, and
      // not theirs to take away or to set the badge of.
      const user = await signedIn();
      const other = user === null || (user !== undefined && n.userId !== undefined && n.userId !== user);
      if (n.type === 'remove' || n.type === 'update') {
        // The user's own notifications only: another member of the
        // conversation signed in at this browser keeps theirs.
        const seqs = Array.isArray(n.seqs) && n.seqs.length > 0 ? n.seqs : [n.seq];
        for (const x of await self.registration.getNotifications({ tag })) {
          const of = x.data && x.data.userId;
          if (n.userId !== undefined && of !== undefined && of !== n.userId) continue;
          if (n.type === 'remove') await removeMessages(self.registration, x, seqs);
          // The user who signed out loses the old text, and whoever is
          // signed in now does not read the new one: closed.
          else if (other && x.data && x.data.seq === n.seq && x.data.text) x.close();
          else if (!other && typeof n.body === 'string') await replaceText(self.registration, x, n.seq, n.body, n.editSeq);
        }
        if (!other && self.navigator.setAppBadge && Number.isInteger(n.badge)) self.navigator.setAppBadge(n.badge).catch(() => {});
        return;
      }
      if (n.type && n.type !== 'message') return; // a type this worker does not know
      if (other) return;
      const wins = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
      if (wins.some((c) => c.visibilityState === 'visible' && c.focused)) return; // the page shows it
      // Shown already, or a newer one is: its badge is as old.
      if (await shownAlready(self.registration, tag, n.userId, n.seq, self.caches)) return;
      const count = n.count > 1 ? n.count : 1;
      const shown = present(n.title, count, n.body);
      await self.registration.showNotification(shown.title, {
        body: shown.body,
        tag,
        renotify: true,
        icon: '/favicon.svg',
        // text: it shows message seq's text (a preview), which the page
        // (src/push.js showEdited) or an update push replaces when that
        // message is edited; edit: the edit that text is of (0: as sent),
        // so an update of an older one is not put back.
        // count and title: what it is shown again with when one of its
        // messages is recalled (removeMessages).
        data: {
          userId: n.userId,
          conversationId: n.conversationId,
          seq: n.seq,
          text: Boolean(n.body),
          edit: Number.isInteger(n.editSeq) ? n.editSeq : 0,
          count,
          title: n.title,
          url: `/#/c/${n.conversationId}`,
        },
      });
      await noteShown(self.caches, tag, n.userId, n.seq);
      if (self.navigator.setAppBadge && Number.isInteger(n.badge)) self.navigator.setAppBadge(n.badge).catch(() => {});
    }),
  );
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  const url = data.url || '/';
  wait(
    event,
    (async () => {
      const wins = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
      const win = wins.find((c) => new URL(c.url).origin === self.location.origin);
      // The notification's user goes with the click: the page follows it
      // only while that user is signed in (one browser, several users).
      if (win) {
        win.postMessage({ type: 'open', conversationId: data.conversationId, userId: data.userId });
        await win.focus().catch(() => {});
        return;
      }
      await self.clients.openWindow(Number.isSafeInteger(data.userId) ? url.replace(/^\/#/, `/?for=${data.userId}#`) : url);
    })(),
  );
});
