// The web client's MQTT session (src/mqtt-session.js, mqtt.js over
// WebSocket) against a real chatd, without a browser: a send made before
// the first CONNACK (the page just loaded, or the phone has no network
// yet) is held until chatd's Maximum Packet Size is known, and one larger
// than it then fails as it would while connected (0x95, not retryable)
// instead of being published: chatd would drop the connection
// (MQTT-3.1.2-24), and mqtt.js would send it again on every reconnection,
// ahead of everything queued after it. The sends queued with it go
// through, in order. web/packet_test.go
// (TestWebClientRefusesAnOversizedSendQueuedBeforeTheFirstCONNACK) starts
// chatd and runs this file.
//
// Env: CHATD_URL.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionSpec, within } from './session.mjs';

const { api, directSession } = sessionSpec();
const ME = 9321;
const PEER = 9322;

test('a send over chatd\'s packet limit queued before the first CONNACK fails once the limit is known; the others go through', async () => {
  const { conv, session, connected } = await directSession(ME, PEER, 'web-early-spec');
  // Not connected yet: all three are queued.
  const before = session.send(conv.id, crypto.randomUUID(), 'before');
  const huge = 'x'.repeat(200 * 1024); // the packet limit is 164 KiB with the default body limit
  const big = session.send(conv.id, crypto.randomUUID(), huge).then(() => null, (e) => e);
  const afterIt = session.send(conv.id, crypto.randomUUID(), 'after');

  const err = await within(big, 15000, 'the oversized send');
  assert.ok(err, 'an oversized send must not be acknowledged');
  assert.equal(err.reasonCode, 0x95, `refused as too large: ${err.message}`);
  assert.equal(err.retryable, false, 'resending the same payload cannot succeed');
  assert.match(err.message, /^Too long to send \(\d+ bytes; the server accepts at most \d+\)\.$/);

  const [a, b] = await within(Promise.all([before, afterIt]), 15000, 'the sends queued with it');
  assert.ok(a.seq < b.seq, `sent in order: ${a.seq} < ${b.seq}`);
  await within(connected, 15000, 'connect');
  const { messages } = await api(ME, 'GET', `/v1/conversations/${conv.id}/messages`);
  assert.deepEqual(messages.map((m) => m.body), ['before', 'after']);
  assert.equal(session.connects, 1, 'the connection was never dropped');
});
