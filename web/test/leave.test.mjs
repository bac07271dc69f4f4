// Unit tests of the Leave button's confirmation (src/views/leave.js),
// which must say what the server does on that leave. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { leaveConfirmation } from '../src/views/leave.js';

const owner = { userId: 1, role: 'owner' };
const admin = { userId: 2, role: 'admin' };
const member = { userId: 3, role: 'member' };

test('the owner leaving is told who owns the group next, or that it is archived', () => {
  assert.equal(leaveConfirmation([owner, admin, member], 1), 'Confirm: the longest-standing admin will own it');
  assert.equal(leaveConfirmation([owner, member], 1), 'Confirm: the longest-standing member will own it');
  assert.equal(leaveConfirmation([owner], 1), 'Confirm: you are the last member; the group will be archived');
});

test('anyone else leaving is asked to confirm the leave only', () => {
  assert.equal(leaveConfirmation([owner, admin, member], 2), 'Confirm: leave');
  assert.equal(leaveConfirmation([owner, member], 3), 'Confirm: leave');
});
