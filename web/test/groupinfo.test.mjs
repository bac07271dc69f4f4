// Unit tests of the group info panel (src/views/people.js openInfo) on
// the stand-in DOM: it follows its group's membership while open.
// Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';

const ME = 1;

/** Whether a control is disabled, set by attribute (h) or property. */
const disabled = (el) => el.disabled ?? 'disabled' in el.attrs;

async function until(what, ok) {
  for (let i = 0; i < 100; i++) {
    if (ok()) return;
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.fail(`not within 200 ms: ${what}`);
}

test('the group info panel follows live role and member changes of its group: a demoted admin loses the buttons chatd would refuse, and typing stays', async () => {
  const undo = fakeDocument();
  try {
    const { openInfo } = await import('../src/views/people.js');
    let members = [
      { userId: 2, role: 'owner' },
      { userId: ME, role: 'admin' },
      { userId: 3, role: 'member' },
    ];
    const c = { id: 5, type: 'GROUP', title: 'Team', about: '', avatarUrl: null, historyVisible: 'joined', settings: null };
    const session = new EventTarget();
    const ctx = {
      state: { me: ME, conv: (id) => (id === 5 ? c : null), changed() {} },
      sync: { session, refreshMembers: async () => {} },
      people: { profiles: new Map() },
      media: { uploader: {} },
      notify() {},
      go() {},
      api: { members: async () => members.map((m) => ({ ...m })) },
    };
    await openInfo(ctx, 5);
    const body = document.body;
    const rows = () => body.findAll('member').map((r) => `${r.attrs['data-user-id']}:${r.attrs['data-role']}`);
    const live = (ev) => session.dispatchEvent(new CustomEvent('event', { detail: { conversationId: 5, actorId: 2, ...ev } }));
    assert.equal(body.findAll('remove-member').length, 1, 'an admin removes plain members');
    assert.equal(disabled(body.find('group-title')), false);

    // The admin types a new name while someone joins: the panel lists
    // them, and the name typed stays.
    body.find('group-title').value = 'Team (new name being typed)';
    body.find('add-member-id').value = '7';
    members = [...members, { userId: 4, role: 'member' }];
    live({ type: 'member.added', userId: 4, role: 'member', seq: 9 });
    await until('the new member listed', () => rows().includes('4:member'));
    assert.equal(body.find('group-title').value, 'Team (new name being typed)', 'a member joining wiped what the admin was typing');
    assert.equal(body.find('add-member-id').value, '7', 'a member joining wiped the user id being typed');

    // The owner demotes the user: no more actions chatd refuses.
    members = members.map((m) => (m.userId === ME ? { ...m, role: 'member' } : m));
    live({ type: 'member.updated', userId: ME, role: 'member', seq: 10 });
    await until('the demotion shown', () => rows().includes(`${ME}:member`));
    assert.equal(body.findAll('remove-member').length, 0, 'a demoted admin is still offered Remove');
    assert.equal(disabled(body.find('group-title')), true, 'a demoted admin may still edit the group');
    assert.equal(body.find('add-member-id').parent.hidden, true, 'a demoted admin is still offered Add');

    // Someone leaves: gone from the list.
    members = members.filter((m) => m.userId !== 3);
    live({ type: 'member.removed', userId: 3 });
    await until('the member gone', () => !rows().includes('3:member'));

    // Another group's changes do not concern this panel; once it is
    // closed, nothing more is asked.
    let asked = 0;
    ctx.api.members = async () => (asked++, members);
    live({ type: 'member.added', conversationId: 6, userId: 9, role: 'member', seq: 3 });
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(asked, 0, 'another group\'s change reloaded this panel');
    body.find('panel-close').dispatch('click');
    live({ type: 'member.updated', userId: 4, role: 'admin', seq: 11 });
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(asked, 0, 'a closed panel still follows its group');
  } finally {
    undo();
  }
});

test('saving the group info sends only what the user changed in it: a rename made elsewhere while it was open is not reverted', async () => {
  const undo = fakeDocument();
  try {
    const { openInfo } = await import('../src/views/people.js');
    const c = { id: 5, type: 'GROUP', title: 'Team', about: 'old', avatarUrl: null, historyVisible: 'joined', settings: null };
    const saved = [];
    const ctx = {
      state: { me: ME, conv: (id) => (id === 5 ? c : null), changed() {}, setConversation() {} },
      sync: { session: new EventTarget(), refreshMembers: async () => {} },
      people: { profiles: new Map() },
      media: { uploader: {} },
      notify() {},
      go() {},
      api: {
        members: async () => [{ userId: ME, role: 'owner' }, { userId: 2, role: 'admin' }],
        updateGroup: async (cid, changes) => (saved.push(changes), { id: cid, ...changes }),
      },
    };
    await openInfo(ctx, 5);
    const body = document.body;
    // The admin renames the group on their phone: the conversation.updated
    // reaches the store while the owner's panel is open.
    Object.assign(c, { title: 'Team 2026', historyVisible: 'all' });
    body.find('group-about').value = 'Bouldering on Sundays';
    body.find('group-save').parent.parent.dispatch('submit');
    for (let i = 0; i < 50 && !saved.length; i++) await new Promise((r) => setTimeout(r, 1));
    assert.deepEqual(saved, [{ about: 'Bouldering on Sundays' }], 'the save sent back what the panel showed before a change made elsewhere');
  } finally {
    undo();
  }
});
