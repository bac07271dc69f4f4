// The web client's MQTT session (src/mqtt-session.js, mqtt.js over
// WebSocket) against a real chatd, without a browser: a send resolves with
// what chatd's PUBACK says (docs/protocol.md "Send outcomes"): the seq, and
// for a resend of the same clientMsgId the original seq and duplicate.
// mqtt.js hands a publish's callback the stored PUBLISH rather than the
// PUBACK, so the session has to read the PUBACK itself.
// web/packet_test.go (TestWebClientSendResolvesWithTheSeqOfChatdsPUBACK)
// starts chatd and runs this file.
//
// Env: CHATD_URL.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionSpec } from './session.mjs';

const { api, directSession } = sessionSpec();
const ME = 9311;
const PEER = 9312;

test('a send resolves with the seq of chatd\'s PUBACK, a resend with the original seq and duplicate', async () => {
  const { conv, session, connected } = await directSession(ME, PEER, 'web-puback-spec');
  await connected;

  const id = crypto.randomUUID();
  const first = await session.send(conv.id, id, 'one');
  const second = await session.send(conv.id, crypto.randomUUID(), 'two');
  const again = await session.send(conv.id, id, 'one');
  const { messages } = await api(ME, 'GET', `/v1/conversations/${conv.id}/messages`);
  const seqOf = (body) => messages.find((m) => m.body === body).seq;
  assert.deepEqual(first, { seq: seqOf('one'), duplicate: false, unchanged: false });
  assert.deepEqual(second, { seq: seqOf('two'), duplicate: false, unchanged: false });
  assert.deepEqual(again, { seq: seqOf('one'), duplicate: true, unchanged: false });
});
