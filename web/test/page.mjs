// What the unit tests of the conversation view share: the view on the
// stand-in DOM, and the entries of conversation 7 they load into it.
import { fakeDocument } from './fakedom.mjs';
import { changeFromEvent } from '../src/store/lifecycle.js';

/**
 * Runs fn on the stand-in DOM with open(state, sync?, media?), which makes
 * the conversation view, and puts the globals back afterwards.
 */
export async function onPage(fn) {
  const undo = fakeDocument();
  globalThis.ResizeObserver = class {
    observe() {}
  };
  try {
    const { createConversationView } = await import('../src/views/conversation.js');
    await fn((state, sync = { send() {}, typing() {} }, media = { uploader: {}, cache: {} }) =>
      createConversationView(state, sync, media, { back() {}, addMember() {}, info() {} }));
  } finally {
    delete globalThis.ResizeObserver;
    undo();
  }
}

/** The time of the entry at seq: one second apart. */
export const at = (seq) => new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString();

/** User 1's message at seq of conversation 7. */
export const msg = (seq, body, extra = {}) => ({ conversationId: 7, seq, kind: 'message', senderId: 1, clientMsgId: `c${seq}`, body, createdAt: at(seq), ...extra });

/** The entry at seq of conversation 7 recalling targetSeq, as the client applies it. */
export const recalled = (seq, targetSeq) => changeFromEvent({ type: 'message.recalled', conversationId: 7, seq, targetSeq, actorId: 1, recalledAt: at(seq) });
