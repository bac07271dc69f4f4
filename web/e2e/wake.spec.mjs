// The network comes back (out of a tunnel, a lift, airplane mode off):
// the MQTT connection from before it went is dead but was never closed,
// and mqtt.js would notice only through its keep-alive, up to 45 s later,
// while messages to the user wait. The page's 'online' event makes the
// client reconnect at once. In headless Chromium against a real chatd,
// behind a proxy that leaves the old connection open but silent.
// web/wake_test.go (TestBrowserReconnectsAtOnceWhenTheNetworkComesBack)
// starts chatd and runs this file.
//
// Env: CHATD_URL, CHROMIUM_PATH.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSpec, bodies, eventually, finish, openDirect } from './helpers.mjs';
import { startProxy } from './proxy.mjs';

const spec = browserSpec();
const { BASE, sendAs } = spec;


const ME = 9341;
const PEER = 9342;

test('when the network comes back, a message sent meanwhile arrives at once, not after the keep-alive gives up', async () => {
  const proxy = await startProxy(BASE);
  try {
    const { conv, a } = await openDirect(spec, ME, PEER, [[PEER, 'before']], { base: proxy.url });

    // The network goes and comes back; the connection from before stays
    // open, silent.
    proxy.blackhole();
    await a.context.setOffline(true);
    await sendAs(PEER, conv.id, 'while away');
    await a.context.setOffline(false);
    await eventually(async () => assert.deepEqual(await bodies(a.page), ['before', 'while away']), { timeout: 10000 });
    await sendAs(PEER, conv.id, 'after');
    await eventually(async () => assert.deepEqual(await bodies(a.page), ['before', 'while away', 'after']), { timeout: 10000 });
    await finish(a);
  } finally {
    await proxy.close();
  }
});
