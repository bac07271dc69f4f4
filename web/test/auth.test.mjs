// Unit tests of src/auth.js's timer. Plain Node. Run: node --test web/test/
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { callAt } from '../src/auth.js';

test('a sign-out timer for a token that lives longer than setTimeout can wait (24.8 days) fires at the expiry, not early', () => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  try {
    const day = 24 * 3600 * 1000;
    const at = 30 * day;
    let fired = 0;
    const cancel = callAt(at, () => fired++);
    mock.timers.tick(2 ** 31); // past the longest delay one setTimeout takes
    assert.equal(fired, 0, 'fired 5 days before the token expires');
    mock.timers.tick(at - 2 ** 31 - 1);
    assert.equal(fired, 0, 'fired before the token expires');
    mock.timers.tick(1);
    assert.equal(fired, 1, 'did not fire at the expiry');
    cancel();

    let other = 0;
    const stop = callAt(Date.now() + 40 * day, () => other++);
    mock.timers.tick(30 * day);
    stop();
    mock.timers.tick(20 * day);
    assert.equal(other, 0, 'a cancelled timer fired');
  } finally {
    mock.timers.reset();
  }
});
