// A TCP proxy in front of chatd whose "network" the test can cut. Chromium
// keeps WebSockets open through Playwright's setOffline (only new requests
// fail), so a real loss of connectivity is made here instead: cut() resets
// every open connection (the page's MQTT WebSocket and its keep-alive HTTP
// connections) and refuses new ones until restore(); blackhole() leaves
// them open but silent.
import net from 'node:net';

export async function startProxy(targetUrl) {
  const target = new URL(targetUrl);
  const sockets = new Set();
  const pairs = new Set();
  let down = false;
  const server = net.createServer((client) => {
    if (down) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair = [client, upstream];
    pairs.add(pair);
    for (const s of pair) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        pairs.delete(pair);
        for (const o of pair) if (o !== s) o.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      down = true;
      for (const s of sockets) s.resetAndDestroy();
    },
    restore() {
      down = false;
    },
    // Every open connection goes silent, as one over a network that is
    // gone does: no reset, no close, nothing passes either way. New
    // connections work.
    blackhole() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    close() {
      down = true;
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
