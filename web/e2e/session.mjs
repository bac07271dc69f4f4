// What the specs of the web client's MQTT session share (src/mqtt-session.js
// in Node, mqtt.js over WebSocket, no browser): the chatd under test and
// its dev API, a session of one user's with a direct conversation to send
// to, and a deadline on what it awaits.

import { after } from 'node:test';
import { devAPI } from './helpers.mjs';
import { MqttSession } from '../src/mqtt-session.js';

/**
 * The frame of a session spec: the chatd under test (CHATD_URL) and its
 * dev API (token, api); the sessions spec.directSession opens are closed
 * after the spec's tests.
 */
export function sessionSpec() {
  const BASE = process.env.CHATD_URL;
  if (!BASE) throw new Error('set CHATD_URL');
  globalThis.location ??= new URL(BASE);
  const { token, api } = devAPI(BASE);
  const sessions = [];
  after(() => sessions.forEach((s) => s.close()));
  /**
   * me's direct conversation with peer and me's session (clientId), just
   * told to connect: connected settles at its first CONNACK, and what is
   * sent before then is queued.
   */
  async function directSession(me, peer, clientId) {
    await token(peer);
    const conv = await api(me, 'POST', `/v1/direct/${peer}`);
    const session = new MqttSession({ userId: me, token: await token(me), clientId, url: BASE.replace(/^http/, 'ws') + '/mqtt' });
    sessions.push(session);
    const connected = new Promise((resolve) => session.addEventListener('connected', resolve, { once: true }));
    session.connect();
    return { conv, session, connected };
  }
  return { BASE, token, api, directSession };
}

/**
 * p, or a rejection once ms have passed. The timer is cleared when p
 * settles, so that node exits once the spec is done, not ms later.
 */
export function within(p, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms}ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
