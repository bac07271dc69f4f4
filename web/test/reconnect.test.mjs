// The web client's reconnect schedule (src/mqtt-session.js). After a chatd
// restart every page it served loses its connection at the same moment; a
// fixed period brings them all back in step, again and again while chatd
// is still starting. The delay after each failed attempt in a row grows
// (doubling, capped) with a random part, as the Go client's does.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { MqttSession, reconnectDelay } from '../src/mqtt-session.js';

test('the reconnect delay doubles with each failure in a row, capped, and is jittered', () => {
  for (let n = 1; n <= 12; n++) {
    const full = Math.min(30000, 1000 * 2 ** (n - 1));
    const seen = new Set();
    for (let i = 0; i < 50; i++) {
      const d = reconnectDelay(n);
      assert.ok(d >= full / 2 && d <= full, `attempt ${n}: ${d} ms outside [${full / 2}, ${full}]`);
      seen.add(Math.round(d));
    }
    assert.ok(seen.size > 1, `attempt ${n}: every client would wait the same ${[...seen]} ms`);
  }
});

test('a session whose server does not answer tries again sooner first, then less and less often', async () => {
  // A port that refuses: every attempt fails at once.
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const port = srv.address().port;
  await new Promise((r) => srv.close(r));

  globalThis.location ??= new URL(`http://127.0.0.1:${port}`);
  const s = new MqttSession({ userId: 1, token: 't', clientId: 'reconnect-test', url: `ws://127.0.0.1:${port}/mqtt` });
  const attempts = [];
  // When each attempt failed: the pause before the next is measured from
  // there, not from the attempt, whose failing takes longer on a loaded
  // machine and is not the session's to decide.
  const failed = [];
  s.addEventListener('status', (e) => {
    if (e.detail === 'connecting') attempts.push(Date.now());
    if (e.detail === 'offline' && failed.length < attempts.length) failed.push(Date.now());
  });
  s.addEventListener('error', () => {});
  s.connect();
  try {
    const end = Date.now() + 9000;
    while (attempts.length < 4 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.ok(attempts.length >= 4, `only ${attempts.length} attempts in 9 s`);
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]);
    const firstPause = attempts[1] - failed[0];
    assert.ok(firstPause <= 1200, `the first retry came ${firstPause} ms after the attempt failed: a dropped connection should be tried again within a second`);
    assert.ok(gaps[2] >= 1.5 * gaps[0] && gaps[2] >= 1500, `the attempts do not space out: gaps ${gaps} ms`);
  } finally {
    s.close();
  }
});

test('after a CONNACK 0x9F carrying retryAfter the session reconnects no sooner than it says', async () => {
  // A server that refuses every connect for a connect rate limit, as
  // chatd does: CONNACK 0x9F with the user property retryAfter=2.
  const { WebSocketServer } = await import('ws');
  const mqttPacket = (await import('mqtt-packet')).default;
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  const port = wss.address().port;
  const connects = [];
  wss.on('connection', (ws) => {
    ws.once('message', () => {
      connects.push(Date.now());
      const connack = { cmd: 'connack', sessionPresent: false, reasonCode: 0x9f, properties: { userProperties: { retryAfter: '2' } } };
      ws.send(mqttPacket.generate(connack, { protocolVersion: 5 }));
    });
  });

  globalThis.location ??= new URL(`http://127.0.0.1:${port}`);
  const s = new MqttSession({ userId: 1, token: 't', clientId: 'connack-retry-after-test', url: `ws://127.0.0.1:${port}/mqtt` });
  s.addEventListener('error', () => {});
  s.connect();
  try {
    const end = Date.now() + 5000;
    while (connects.length < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    assert.equal(connects.length, 2, 'no reconnect within 5 s');
    const gap = connects[1] - connects[0];
    assert.ok(gap >= 2000, `reconnected after ${gap} ms, before the CONNACK's retryAfter of 2 s`);
  } finally {
    s.close();
    for (const ws of wss.clients) ws.terminate();
    await new Promise((r) => wss.close(r));
  }
});
