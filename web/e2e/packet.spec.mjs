// The web client's MQTT session (src/mqtt-session.js, mqtt.js over
// WebSocket) against a real chatd, without a browser: a publish larger
// than the Maximum Packet Size of chatd's CONNACK is refused by the client
// itself, and the connection and the sends after it are unharmed. Sent
// anyway, chatd would drop the connection (MQTT-3.1.2-24), and mqtt.js,
// whose persistent session keeps the unacknowledged publish, would send it
// again on every reconnection, ahead of everything queued after it.
// web/packet_test.go (TestWebClientRefusesAPublishOverChatdsPacketLimit)
// starts chatd and runs this file.
//
// Env: CHATD_URL.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionSpec, within } from './session.mjs';

const { api, directSession } = sessionSpec();
const ME = 9301;
const PEER = 9302;

test('a publish over chatd\'s packet limit is refused locally and the connection stays', async () => {
  const { conv, session, connected } = await directSession(ME, PEER, 'web-packet-spec');
  await within(connected, 15000, 'connect');

  const huge = 'x'.repeat(200 * 1024); // the packet limit is 164 KiB with the default body limit
  const err = await within(session.send(conv.id, crypto.randomUUID(), huge).then(() => null, (e) => e), 5000, 'the oversized send');
  assert.ok(err, 'an oversized send must not be acknowledged');
  assert.equal(err.reasonCode, 0x95, `refused as too large: ${err.message}`);
  assert.equal(err.retryable, false, 'resending the same payload cannot succeed');

  await within(session.send(conv.id, crypto.randomUUID(), 'still here'), 5000, 'the send after it');
  const { messages } = await api(ME, 'GET', `/v1/conversations/${conv.id}/messages`);
  assert.deepEqual(messages.map((m) => m.body), ['still here']);
  assert.equal(session.connects, 1, 'the connection was never dropped');
});
