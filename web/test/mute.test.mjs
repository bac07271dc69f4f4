// Unit tests of the mute toggle of the conversation panels
// (src/views/people.js), on the stand-in DOM. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';

test('the mute toggle keeps the conversation\'s mentions setting (the PUT sets every setting)', async () => {
  const undo = fakeDocument();
  try {
    const { openInfo } = await import('../src/views/people.js');
    const puts = [];
    const c = { id: 5, type: 'DIRECT', peerId: () => 2, settings: { muted: false, mutedUntil: null, mentions: false } };
    const ctx = {
      state: { me: 1, conv: (id) => (id === 5 ? c : null), changed() {} },
      people: { profiles: new Map() },
      notify() {},
      api: {
        user: async (id) => ({ id, displayName: 'Bo', online: false }),
        blocks: async () => ({ blocked: [] }),
        setConversationSettings: async (cid, s) => (puts.push(s), { mutedUntil: null, ...s }),
      },
    };
    await openInfo(ctx, 5);
    const box = document.body.find('mute-toggle');
    box.checked = true;
    box.dispatch('change');
    for (let i = 0; i < 50 && !puts.length; i++) await new Promise((r) => setTimeout(r, 1));
    assert.deepEqual(puts, [{ muted: true, mentions: false }], 'muting turned mentions back on');
  } finally {
    undo();
  }
});
