// Unit tests of People (src/store/people.js), the names and avatars cache,
// with a fake HTTP API that answers GET /v1/users as chatd does: an ETag
// per answer, 304 when If-None-Match still matches. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../src/api.js';
import { People } from '../src/store/people.js';

const NAMES = { 1: 'Me', 2: 'Ann', 3: 'Bob' };

function fakeApi() {
  const api = {
    down: false,
    calls: [],
    async users(ids, etag) {
      api.calls.push(`${ids.join(',')} ${etag || '-'}`);
      if (api.down) throw new ApiError(0, 'network', 'network error: Failed to fetch');
      const tag = `"${ids.join(',')}"`; // the names never change here
      if (etag === tag) return null;
      return { users: ids.map((id) => ({ id, displayName: NAMES[id], avatar: null, about: '' })), etag: tag };
    },
  };
  return api;
}

const flushed = () => new Promise((r) => setTimeout(r, 40));

test('names stay on screen when their refresh after a reconnect fails, and no 304 leaves anyone as "User N"', async () => {
  const api = fakeApi();
  const people = new People(api, 1);
  people.name(2);
  people.name(3);
  await flushed();
  assert.deepEqual([people.name(2), people.name(3)], ['Ann', 'Bob']);

  // A reconnect on a flaky network: the refresh fails.
  api.down = true;
  people.refresh();
  await flushed();
  assert.deepEqual([people.name(2), people.name(3)], ['Ann', 'Bob'], 'known names turned into "User N" because a refresh failed');

  // The network is back: the next renders and refreshes show the names.
  api.down = false;
  people.name(2);
  people.name(3);
  await flushed();
  people.refresh();
  await flushed();
  people.name(2);
  people.name(3);
  await flushed();
  assert.deepEqual([people.name(2), people.name(3)], ['Ann', 'Bob'], `calls: ${api.calls.join(' | ')}`);
});

test('a users answer read before a profile.updated that came first does not put the older profile back', async () => {
  let answer;
  const api = {
    async users() {
      return new Promise((r) => (answer = r));
    },
  };
  const people = new People(api, 1);
  people.name(2);
  await flushed(); // the batch asked for user 2; its answer is on its way
  people.apply({ type: 'profile.updated', userId: 2, displayName: 'Ann Lee', avatar: '', about: 'climber', updatedAt: '2026-03-01T12:00:00.000002Z' });
  answer({ users: [{ id: 2, displayName: 'Ann', avatar: null, about: '', updatedAt: '2026-03-01T12:00:00.000001Z' }], etag: '"2"' });
  await flushed();
  assert.equal(people.name(2), 'Ann Lee', 'the profile read before the change replaced it');
  // A newer one still replaces it, whichever way it comes.
  people.apply({ type: 'profile.updated', userId: 2, displayName: 'Ann L.', avatar: '', about: '', updatedAt: '2026-03-01T12:00:01Z' });
  assert.equal(people.name(2), 'Ann L.');
  people.apply({ type: 'profile.updated', userId: 2, displayName: 'Ann (old event)', avatar: '', about: '', updatedAt: '2026-03-01T12:00:00.5Z' });
  assert.equal(people.name(2), 'Ann L.', 'an older profile.updated replaced a newer one');
});

test('a name that reads as a label the page gives ("You", "User N") is shown with the id of whoever chose it', async () => {
  const names = { 2: 'You', 3: 'User 4', 5: 'you', 6: 'Ｙｏｕ', 7: 'You\u200b', 8: 'USER  12', 9: 'Ann', 10: 'User 10', 11: 'Youssef' };
  const api = {
    async users(ids) {
      return { users: ids.map((id) => ({ id, displayName: names[id], avatar: null, about: '' })), etag: '"x"' };
    },
  };
  const people = new People(api, 1);
  const ids = Object.keys(names).map(Number);
  for (const id of ids) people.name(id);
  await flushed();
  assert.deepEqual(
    ids.map((id) => people.name(id)),
    ['You (user 2)', 'User 4 (user 3)', 'you (user 5)', 'Ｙｏｕ (user 6)', 'You\u200b (user 7)', 'USER  12 (user 8)', 'Ann', 'User 10', 'Youssef'],
    'someone else reads as "You" (the signed-in user) or as another user: their messages, inbox previews and notices pass for theirs',
  );
  // The signed-in user sees their own chosen name as it is.
  people.profiles.set(1, { id: 1, displayName: 'You', avatar: null, about: '' });
  assert.equal(people.name(1, { you: false }), 'You');
});

test('a profile.updated without avatar and about (a block: the name alone) drops the ones held, and the unblock brings them back', async () => {
  const at = '2026-03-01T12:00:00.000001Z'; // a block changes no profile: its events carry the same updatedAt
  const api = {
    async users(ids) {
      return { users: ids.map((id) => ({ id, displayName: 'Ann', avatar: '/v1/attachments/a', about: 'climber', updatedAt: at })), etag: '"2"' };
    },
  };
  const people = new People(api, 1);
  people.name(2);
  await flushed();
  assert.equal(people.avatar(2), '/v1/attachments/a');
  for (const blocked of [
    { type: 'profile.updated', userId: 2, displayName: 'Ann', avatar: '', about: '', updatedAt: at }, // as chatd sends it
    { type: 'profile.updated', userId: 2, displayName: 'Ann', updatedAt: at }, // the fields absent
  ]) {
    people.apply({ type: 'profile.updated', userId: 2, displayName: 'Ann', avatar: '/v1/attachments/a', about: 'climber', updatedAt: at });
    people.apply(blocked);
    assert.equal(people.avatar(2), null, `the avatar stayed after ${JSON.stringify(blocked)}`);
    assert.equal(people.profile(2).about, '', `the about stayed after ${JSON.stringify(blocked)}`);
    assert.equal(people.name(2), 'Ann', 'the name labels their messages still');
  }
  people.apply({ type: 'profile.updated', userId: 2, displayName: 'Ann', avatar: '/v1/attachments/a', about: 'climber', updatedAt: at });
  assert.deepEqual([people.avatar(2), people.profile(2).about], ['/v1/attachments/a', 'climber'], 'the unblock did not bring them back');
});
