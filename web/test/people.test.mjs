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
