// Sign-outs as the tabs of one browser share them. What a session keeps
// in localStorage for a later page (the outbox's unsent messages, the
// tray's uploads) goes when the user signs out here; but another tab of
// the same session, not yet told (its storage event still to come, its
// writes not ordered against this tab's), may write an entry back just
// after. So signing out also leaves a mark, and an entry written by a
// session begun before the mark is neither read nor written again.
//
// The mark is a random token, not a time: a session compares the token
// it began under with the one stored now. A time would take a session
// begun in the same millisecond as the sign-out (a sign-in right after
// it), or on a clock set back since, for one the sign-out ended.

import { uuid4 } from './uuid.js';

/** Where user <id>'s mark is kept: PREFIX + id. It outlives their entries. */
const PREFIX = 'chatd.signedOut.';

/** User userId's mark in storage now: '' before their first sign-out here. */
function markOf(userId, storage) {
  if (userId === null || userId === undefined) return '';
  try {
    return storage?.getItem(PREFIX + userId) ?? '';
  } catch {
    return ''; // Unavailable: nothing is kept either.
  }
}

/**
 * Signing out userId at this browser: every session of theirs begun
 * before is over (SessionMark), in whatever tab it runs.
 */
export function markSignedOut(userId, storage = globalThis.localStorage ?? null) {
  try {
    storage?.setItem(PREFIX + userId, uuid4());
  } catch {
    // Unavailable: nothing is kept either.
  }
}

/**
 * A page's session of user userId, as the entries it writes say it
 * (mark): what a sign-out since (markSignedOut) ended.
 */
export class SessionMark {
  /**
   * @param {number|null} userId null: no user, never signed out
   * @param {Storage|null} storage
   */
  constructor(userId, storage = globalThis.localStorage ?? null) {
    this.userId = userId;
    this.storage = storage;
    /** The mark this session began under: what its entries carry. */
    this.mark = markOf(userId, storage);
  }

  /**
   * Whether an entry written under mark (its session's; not a string: a
   * version that did not say, taken as written before any sign-out) is
   * of a session the user signed out of since: the one rule.
   */
  signedOut(mark) {
    return (typeof mark === 'string' ? mark : '') !== markOf(this.userId, this.storage);
  }

  /** Whether this page's session was signed out (in any tab): it writes nothing more. */
  over() {
    return this.signedOut(this.mark);
  }
}
