// End-to-end tests of people and groups in the web client: profiles and
// names everywhere, the group info panel (rename, roles, add/remove,
// leave), privacy settings, and search that jumps to the hit. Run by
// web/people_browser_test.go against a chatd of its own; by hand:
//
//   CHATD_URL=http://127.0.0.1:8080 node web/e2e/people.spec.mjs
//
// Env as chat.spec.mjs: CHATD_URL, CHROMIUM_PATH, SCREENSHOT_DIR (profile.png,
// group-info.png and search.png go there). Users are 300 and up, their own.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { browserSpec, devSignIn, eventually, finish, online, openConversation, row, stays } from './helpers.mjs';

const spec = browserSpec();
const { BASE, pages, api } = spec;
const SHOTS = process.env.SCREENSHOT_DIR || '';



// Seeding sends many messages as one user: past the per-user API rate
// (429) it waits and sends again with the same clientMsgId, as a client
// would.
async function sendVia(uid, cid, body) {
  const clientMsgId = crypto.randomUUID();
  for (;;) {
    try {
      return await api(uid, 'POST', `/v1/conversations/${cid}/messages`, { clientMsgId, body });
    } catch (e) {
      if (!/: 429 /.test(e.message)) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

const signIn = (uid, { viewport = { width: 1280, height: 800 } } = {}) => devSignIn(spec.browser, pages, uid, { base: BASE, viewport });

const title = (page, cid) => row(page, cid).getByTestId('conv-title').textContent();

const notices = (page) => page.getByTestId('system').allTextContents();

// A 1×1 PNG: an avatar chatd decodes and thumbnails.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

// -------------------------------------------------------------- scenarios

test('profile: a name set in the editor shows everywhere, live, for who shares a chat', async () => {
  const d = await api(301, 'POST', '/v1/direct/302');
  const g = await api(303, 'POST', '/v1/conversations', { type: 'group', title: 'Climbing', members: [301, 302] });
  await sendVia(301, g.id, 'See you at the crag');
  const a = await signIn(301);
  const b = await signIn(302);
  await eventually(async () => assert.equal(await title(b.page, d.id), 'User 301'));

  await a.page.getByTestId('profile').click();
  await a.page.getByTestId('profile-name').fill('Ann Lee');
  await a.page.getByTestId('profile-about').fill('Climbs on Sundays');
  await a.page.getByTestId('profile-save').click();
  await eventually(async () => assert.equal(await a.page.getByTestId('me').textContent(), 'Ann Lee'));
  // A picture file becomes the avatar: uploaded to chatd, then fetched
  // with the token (a blob: URL) by who shares a chat.
  await a.page.getByTestId('profile-avatar-file').setInputFiles({ name: 'me.png', mimeType: 'image/png', buffer: Buffer.from(PNG, 'base64') });
  await a.page.getByTestId('profile-save').click();
  await eventually(async () => assert.match((await api(302, 'GET', '/v1/users/301')).avatar || '', /^\/v1\/attachments\/[a-z2-7]{26}$/));
  await eventually(async () => assert.match((await row(b.page, d.id).locator('.avatar img').first().getAttribute('src', { timeout: 1000 })) || '', /^blob:/));
  if (SHOTS) await a.page.screenshot({ path: path.join(SHOTS, 'profile.png') });
  await a.page.getByTestId('panel-close').click();

  // The peer's inbox and the group's sender label follow without a reload.
  await eventually(async () => assert.equal(await title(b.page, d.id), 'Ann Lee'));
  await openConversation(b.page, g.id);
  await eventually(async () => assert.ok((await b.page.locator('.sender').allTextContents()).includes('Ann Lee')));
  // Contact info shows the profile.
  await openConversation(b.page, d.id);
  await b.page.getByTestId('info').click();
  await eventually(async () => assert.equal(await b.page.getByTestId('person-name').textContent(), 'Ann Lee'));
  assert.equal(await b.page.getByTestId('person-about').textContent(), 'Climbs on Sundays');
  await b.page.getByTestId('panel-close').click();
  await finish(a, b);
});

test('group info: rename, roles, add and remove, leave; every member sees the notices', async () => {
  const g = await api(311, 'POST', '/v1/conversations', { type: 'group', title: 'Trip', members: [312, 313] });
  await api(311, 'PUT', '/v1/me', { displayName: 'Olga' });
  await api(312, 'PUT', '/v1/me', { displayName: 'Bram' });
  await api(313, 'PUT', '/v1/me', { displayName: 'Cleo' });
  await sendVia(312, g.id, 'Where are we going?');
  const owner = await signIn(311);
  const member = await signIn(312);
  await openConversation(member.page, g.id);

  await openConversation(owner.page, g.id);
  await owner.page.getByTestId('info').click();
  await owner.page.getByTestId('member-list').waitFor();
  assert.equal(await owner.page.getByTestId('member').count(), 3);
  await owner.page.getByTestId('group-title').fill('Trip to Fontainebleau');
  await owner.page.getByTestId('group-about').fill('Bouldering, 12-14 June');
  await owner.page.getByTestId('group-save').click();
  await eventually(async () => assert.equal(await owner.page.getByTestId('chat-title').textContent(), 'Trip to Fontainebleau'));
  // Bram (a member) is made an admin, 314 is added.
  await owner.page.locator('[data-testid=member][data-user-id="312"] [data-testid=make-admin]').click();
  await eventually(async () => assert.equal(await owner.page.locator('[data-testid=member][data-user-id="312"]').getAttribute('data-role'), 'admin'));
  await owner.page.getByTestId('add-member-id').fill('314');
  await owner.page.getByTestId('add-member-submit').click();
  await eventually(async () => assert.equal(await owner.page.getByTestId('member').count(), 4));
  if (SHOTS) await owner.page.screenshot({ path: path.join(SHOTS, 'group-info.png') });
  await owner.page.getByTestId('panel-close').click();

  // The member, online all along, sees the title and the notices.
  await eventually(async () => assert.equal(await member.page.getByTestId('chat-title').textContent(), 'Trip to Fontainebleau'));
  await eventually(async () =>
    assert.deepEqual(await notices(member.page), ['Olga renamed the group to “Trip to Fontainebleau” and changed the description',
      'Olga made you an admin', 'Olga added User 314']),
  );
  // The admin may remove a plain member, not the owner.
  await member.page.getByTestId('info').click();
  await member.page.locator('[data-testid=member][data-user-id="313"] [data-testid=remove-member]').click();
  await eventually(async () => assert.equal(await member.page.getByTestId('member').count(), 3));
  assert.equal(await member.page.locator('[data-testid=member][data-user-id="311"] [data-testid=remove-member]').count(), 0);
  assert.equal(await member.page.getByTestId('group-history').isDisabled(), true, 'only the owner sets the history');
  // Dismissed as admin while the panel is open (by the owner elsewhere):
  // the admin's buttons go at once, chatd would refuse them, and come
  // back when made admin again.
  await api(311, 'PUT', `/v1/conversations/${g.id}/members/312/role`, { role: 'member' });
  await eventually(async () => assert.equal(await member.page.getByTestId('remove-member').count(), 0, 'a dismissed admin is still offered Remove'));
  assert.equal(await member.page.getByTestId('group-title').isDisabled(), true, 'a dismissed admin may still rename the group');
  await api(311, 'PUT', `/v1/conversations/${g.id}/members/312/role`, { role: 'admin' });
  await eventually(async () => assert.equal(await member.page.getByTestId('remove-member').count(), 1, 'an admin again is not offered Remove'));
  // Mute (push): the member's own setting of this group, kept by the server.
  assert.equal(await member.page.getByTestId('mute-toggle').isChecked(), false);
  await member.page.getByTestId('mute-toggle').check();
  const mutedIn = async () => (await api(312, 'GET', '/v1/inbox')).conversations.find((x) => x.id === g.id)?.settings?.muted === true;
  await eventually(async () => assert.ok(await mutedIn(), 'the inbox shows the group muted'));
  await member.page.getByTestId('panel-close').click();
  await member.page.getByTestId('info').click();
  await eventually(async () => assert.equal(await member.page.getByTestId('mute-toggle').isChecked(), true, 'the panel shows the mute'));
  await member.page.getByTestId('panel-close').click();

  // The owner leaves: the longest-standing admin, Bram, owns the group.
  await owner.page.getByTestId('info').click();
  await owner.page.getByTestId('leave-group').click();
  assert.equal(await owner.page.getByTestId('leave-group').getAttribute('data-armed'), 'true', 'the first click arms Leave');
  await owner.page.getByTestId('leave-group').click();
  await eventually(async () => assert.equal(await row(owner.page, g.id).count(), 0, 'the group is still listed'));
  await eventually(async () => assert.ok((await notices(member.page)).includes('Olga left')));
  await eventually(async () => assert.ok((await notices(member.page)).some((n) => n.startsWith('You now own the group'))));
  await finish(owner, member);
});

test('privacy: with read receipts off the sender sees "Sent", not "Seen", and the reader sees nobody\'s', async () => {
  const d = await api(321, 'POST', '/v1/direct/322');
  const a = await signIn(321);
  const b = await signIn(322);
  await b.page.getByTestId('settings').click();
  await b.page.getByTestId('setting-read-receipts').uncheck();
  await eventually(async () => assert.equal((await api(322, 'GET', '/v1/me/settings')).readReceipts, false));
  await b.page.getByTestId('panel-close').click();

  await openConversation(a.page, d.id);
  await a.page.getByTestId('composer').fill('Did you read this?');
  await a.page.getByTestId('composer').press('Enter');
  await openConversation(b.page, d.id);
  await eventually(async () => assert.ok((await b.page.getByTestId('message-body').allTextContents()).includes('Did you read this?')));
  // b's client marked it read (its own unread count is 0)...
  await eventually(async () => {
    const inbox = await api(322, 'GET', '/v1/inbox');
    assert.equal(inbox.conversations.find((c) => c.id === d.id).unread, 0);
  });
  // ...and a never sees it: a refresh of "seen" still says Sent.
  await a.page.reload();
  await a.page.locator('[data-testid=connection][data-state=online]').waitFor();
  await openConversation(a.page, d.id);
  const receipt = (page) => page.evaluate(() => [...document.querySelectorAll('[data-testid=receipt]')].filter((e) => !e.hidden).pop()?.textContent);
  await eventually(async () => assert.equal(await receipt(a.page), 'Sent'));
  await stays(async () => assert.equal(await receipt(a.page), 'Sent'), { duration: 500 });
  // Reciprocity: b's own message read by a shows no "Seen" to b.
  await b.page.getByTestId('composer').fill('Yes');
  await b.page.getByTestId('composer').press('Enter');
  await eventually(async () => assert.ok((await a.page.getByTestId('message-body').allTextContents()).includes('Yes')));
  await eventually(async () => assert.equal(await receipt(b.page), 'Sent'));
  await stays(async () => assert.equal(await receipt(b.page), 'Sent'), { duration: 800 });
  await finish(a, b);
});

test('sign out everywhere: from settings, after a confirmation; this browser and another are signed out, and signing in again works', async () => {
  const a = await signIn(320);
  const b = await signIn(320);
  await a.page.getByTestId('settings').click();
  const everywhere = a.page.getByTestId('signout-everywhere');
  await everywhere.click();
  // A first click only arms it.
  await stays(async () => assert.equal(await a.page.getByTestId('dev-user').count(), 0, 'signed out on the first click'), { duration: 200 });
  await everywhere.click();
  await a.page.getByTestId('dev-user').waitFor();
  assert.match(await a.page.getByTestId('signin-error').textContent(), /signed out on every device/);
  // The other browser's connection was ended and its token is refused.
  await b.page.getByTestId('dev-user').waitFor({ timeout: 20000 });
  // Tokens issued from the next whole second on work.
  await a.page.waitForTimeout(1100);
  await a.page.getByTestId('dev-user').fill('320');
  await a.page.getByTestId('dev-signin').click();
  await online(a.page);
  await finish(a, b);
});

test('block: from contact info; the blocked person\'s message is refused and never reaches the blocker; unblock from settings', async () => {
  const d = await api(341, 'POST', '/v1/direct/342');
  await api(342, 'PUT', '/v1/me', { displayName: 'Mallory' });
  await sendVia(342, d.id, 'hello there');
  const a = await signIn(341);
  const b = await signIn(342);
  await openConversation(a.page, d.id);
  await a.page.getByTestId('info').click();
  await eventually(async () => assert.equal(await a.page.getByTestId('person-name').textContent(), 'Mallory'));
  await a.page.getByTestId('block-toggle').click();
  await eventually(async () => assert.equal(await a.page.getByTestId('block-toggle').textContent(), 'Unblock'));
  await a.page.getByTestId('panel-close').click();

  await openConversation(b.page, d.id);
  await b.page.getByTestId('composer').fill('are you ignoring me?');
  await b.page.getByTestId('composer').press('Enter');
  const failed = b.page.locator('[data-testid=message].failed');
  await failed.waitFor();
  assert.match(await failed.getAttribute('title'), /does not accept your messages/);
  assert.ok(!(await a.page.getByTestId('message-body').allTextContents()).includes('are you ignoring me?'));

  // Unblocked from the settings' list, the next message goes through.
  await a.page.getByTestId('settings').click();
  await a.page.locator('[data-testid=blocked-user][data-user-id="342"] [data-testid=unblock]').click();
  await eventually(async () => assert.equal(await a.page.getByTestId('blocked-user').count(), 0));
  await a.page.getByTestId('panel-close').click();
  await b.page.getByTestId('composer').fill('ok, sorry');
  await b.page.getByTestId('composer').press('Enter');
  await eventually(async () => assert.ok((await a.page.getByTestId('message-body').allTextContents()).includes('ok, sorry')));
  assert.ok(!(await a.page.getByTestId('message-body').allTextContents()).includes('are you ignoring me?'));
  await finish(a, b);
});

test('search: CJK and words, highlighted, and a hit far back opens scrolled to it', async () => {
  const g = await api(331, 'POST', '/v1/conversations', { type: 'group', title: 'Planning', members: [332] });
  await api(332, 'PUT', '/v1/me', { displayName: 'Wei' });
  const first = await sendVia(332, g.id, '我们明天在北京开会，记得带电脑');
  for (let i = 0; i < 120; i++) await sendVia(331, g.id, `filler message ${i}`);
  await sendVia(332, g.id, 'The agenda for the meeting is in the doc');
  const other = await api(333, 'POST', '/v1/conversations', { type: 'group', title: 'Not yours', members: [334] });
  await sendVia(333, other.id, '北京 is not for you');

  const a = await signIn(331);
  await a.page.getByTestId('search').fill('北京');
  await eventually(async () => assert.equal(await a.page.getByTestId('search-hit').count(), 1));
  assert.equal(await a.page.locator('[data-testid=search-hit] mark').textContent(), '北京');
  assert.ok((await a.page.getByTestId('search-hit').textContent()).includes('Wei'));
  if (SHOTS) await a.page.screenshot({ path: path.join(SHOTS, 'search.png') });
  await a.page.getByTestId('search-hit').click();
  await a.page.locator(`[data-testid=conversation][data-conv-id="${g.id}"]`).waitFor();
  // The hit, 120 messages back, is loaded, on screen and marked.
  const hit = a.page.locator(`[data-testid=message][data-seq="${first.seq}"]`);
  await hit.waitFor();
  await eventually(async () => assert.ok(await hit.evaluate((e) => e.classList.contains('hit'))));
  await eventually(async () => {
    const box = await hit.boundingBox();
    const pane = await a.page.getByTestId('messages').boundingBox();
    assert.ok(box && box.y >= pane.y && box.y + box.height <= pane.y + pane.height, 'the hit is on screen');
  });
  await a.page.getByTestId('search').fill('meet');
  await eventually(async () => assert.deepEqual(await a.page.locator('[data-testid=search-hit] mark').allTextContents(), ['meet']));
  await a.page.getByTestId('search').fill('nothingmatchesthis');
  await eventually(async () => assert.match(await a.page.getByTestId('search-note').textContent(), /No messages match/));
  await a.page.getByTestId('search').fill('');
  await row(a.page, g.id).waitFor();
  await finish(a);
});

test('search: a hit edited while shown is searched again, marked anew while it still matches, gone once it does not', async () => {
  const g = await api(361, 'POST', '/v1/conversations', { type: 'group', title: 'Bakery', members: [362] });
  const cake = await sendVia(362, g.id, 'the cake is ready');
  const tart = await sendVia(362, g.id, 'cake or tart?');
  const a = await signIn(361);
  await a.page.getByTestId('search').fill('cake');
  await eventually(async () => assert.equal(await a.page.getByTestId('search-hit').count(), 2));
  const hit = (seq) => a.page.locator(`[data-testid=search-hit][data-seq="${seq}"]`);
  const edit = (seq, body) => api(362, 'PATCH', `/v1/conversations/${g.id}/messages/${seq}`, { clientMsgId: crypto.randomUUID(), body });
  await edit(cake.seq, 'the cheesecake is ready');
  await eventually(async () => {
    assert.match(await hit(cake.seq).textContent(), /the cheesecake is ready/);
    assert.deepEqual(await hit(cake.seq).locator('mark').allTextContents(), ['cake'], 'the edited hit is not marked as the server matches it');
  });
  await edit(tart.seq, 'pie or tart?');
  await eventually(async () => assert.equal(await hit(tart.seq).count(), 0, 'a hit whose new text does not match is still listed'));
  assert.equal(await hit(cake.seq).count(), 1);
  await finish(a);
});

test('signed out in another tab while the group info panel is open: the panel leaves the screen with the conversations', async () => {
  const g = await api(351, 'POST', '/v1/conversations', { type: 'group', title: 'Surprise party for Dana', members: [352] });
  const a = await signIn(351);
  await openConversation(a.page, g.id);
  await a.page.getByTestId('info').click();
  await a.page.getByTestId('member-list').waitFor();
  assert.ok((await a.page.getByTestId('group-info').textContent()).includes('Surprise party for Dana'));
  // Another tab of the same browser signs out: this tab is signed out too.
  const other = await a.context.newPage();
  await other.goto(BASE);
  await other.locator('[data-testid=connection][data-state=online]').waitFor();
  await other.getByRole('button', { name: 'Sign out' }).click();
  await a.page.getByTestId('signin').waitFor();
  assert.equal(await a.page.getByTestId('group-info').count(), 0, 'the group info panel is still on screen');
  const text = await a.page.evaluate(() => document.body.innerText);
  assert.ok(!text.includes('Surprise party'), `the signed-out page still shows: ${text}`);
  await finish(a);
});
