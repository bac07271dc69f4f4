// The MQTT connection (docs/protocol.md): v5 over WebSocket to the page's
// own origin, the JWT as password, a persistent session (clean start 0 and
// a session expiry) so the server replays what we missed while offline.
// mqtt.js reconnects by itself (on the schedule of reconnectDelay); this
// module turns its callbacks into promises and DOM-style events.

import mqtt from 'mqtt';
import { retryAfterDelay, retryAfterSeconds } from './retry.js';

/** Reason codes after which resending the same clientMsgId may succeed. */
const RETRYABLE = new Set([0x80, 0x83, 0x88, 0x89, 0x97]);

export class SendError extends Error {
  /** retryAfter: the seconds a rate limit's refusal asks to wait (0: none said). */
  constructor(message, reasonCode, retryAfter = 0) {
    super(message);
    this.reasonCode = reasonCode;
    this.retryable = reasonCode === undefined || RETRYABLE.has(reasonCode);
    this.retryAfter = retryAfter;
  }
}

/**
 * The pause before reconnect attempt n of a run of failures (1 after a
 * connection dropped): 1 s doubling, capped at 30 s, of which a random
 * half to all. After a chatd restart every page it served loses its
 * connection at once; a fixed period would bring them all back in step,
 * again and again while chatd is still starting (the Go client backs off
 * the same way).
 */
export function reconnectDelay(n) {
  const full = Math.min(30000, 1000 * 2 ** (Math.min(n, 16) - 1));
  return full / 2 + Math.random() * (full / 2);
}

/**
 * How many client ids in a row (no CONNACK 0 between them) a session
 * takes after CONNACK 0x85 before it stops: another user's session
 * holding one random id is bad luck, or someone squatting it; a server
 * refusing three fresh ones refuses them all, and asking it again
 * changes nothing.
 */
export const MAX_CLIENT_ID_RENEWALS = 3;

export class MqttSession extends EventTarget {
  /**
   * renewClientId(refused) resolves with a client id of this tab's own to
   * use instead of refused, which the server answered CONNACK 0x85
   * (another user's session holds it). Without it, 0x85 stops the
   * session as after MAX_CLIENT_ID_RENEWALS. forgetClientId(refused) is
   * told the id the session stopped on, refused too, so that no later
   * page claims it again (a reload's first CONNECT refused again).
   * @param {{userId:number, token:string, clientId:string, url?:string,
   *   renewClientId?:(refused:string)=>Promise<string>,
   *   forgetClientId?:(refused:string)=>void}} o
   */
  constructor({ userId, token, clientId, url, renewClientId = null, forgetClientId = null }) {
    super();
    this.userId = userId;
    this.eventsTopic = `chat/v1/user/${userId}/events`;
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    this.url = url || `${scheme}//${location.host}/mqtt`;
    this.token = token;
    this.clientId = clientId;
    this.renewClientId = renewClientId;
    this.forgetClientId = forgetClientId;
    // Client ids taken since the last CONNACK 0; a new one on its way.
    this.renewals = 0;
    this.renewing = false;
    // The server refused every client id we had (0x85): stopped.
    this.refused = null;
    this.client = null;
    this.connects = 0;
    // The retryAfter of the last CONNACK refusing us, in seconds (0: none).
    this.connackRetryAfter = 0;
    // The largest packet the server accepts, from its last CONNACK (0: not
    // known yet, or no limit).
    this.maxPacket = 0;
    // Publishes asked for before the first CONNACK, when the limit is not
    // known yet: held here, in order, and checked against it once it is.
    this.early = [];
    // Publishes handed to mqtt.js and not answered yet: stopRefused
    // answers them, as mqtt.js never will once it ends without a flush.
    this.handed = new Set();
  }

  connect() {
    this.client = mqtt.connect(this.url, {
      protocolVersion: 5,
      clientId: this.clientId,
      username: String(this.userId),
      password: this.token,
      clean: false,
      // One day: a phone that sleeps overnight still resumes exactly.
      properties: { sessionExpiryInterval: 86400 },
      keepalive: 30,
      reconnectPeriod: reconnectDelay(1),
      connectTimeout: 10000,
      // 0x88 (database unavailable) is worth retrying; bad credentials end
      // the session in the 'error' handler below.
      reconnectOnConnackError: true,
      // mqtt.js's default keepalive timer runs in a Worker made from a blob:
      // URL, which our Content-Security-Policy forbids.
      timerVariant: 'native',
      // We resubscribe ourselves on every CONNACK (see below).
      resubscribe: false,
    });
    const c = this.client;
    // mqtt.js hands a successful publish's callback the stored PUBLISH, not
    // the PUBACK whose user properties carry the seq: keep each PUBACK's
    // properties by packet id until that callback takes them.
    this.acks = new Map();
    c.on('packetreceive', (p) => {
      if (p.cmd === 'puback') this.acks.set(p.messageId, p.properties || {});
      // A CONNACK 0x9F for a connect rate limit says when to come back:
      // the reconnect after it waits at least that long.
      if (p.cmd === 'connack') this.connackRetryAfter = p.reasonCode ? retryAfterSeconds(userProp(p.properties?.userProperties, 'retryAfter')) : 0;
    });
    this.emit('status', 'connecting');
    c.on('connect', (connack) => {
      this.connects++;
      this.failures = 0;
      this.renewals = 0;
      this.maxPacket = connack.properties?.maximumPacketSize || 0;
      // The body limit (docs/protocol.md, "Capabilities"): absent from an
      // older server, whose too_large refusals still say it.
      const maxBody = Number(userProp(connack.properties?.userProperties, 'maxBodyBytes'));
      this.maxBodyBytes = Number.isSafeInteger(maxBody) && maxBody > 0 ? maxBody : 0;
      const early = this.early.splice(0);
      for (const p of early) this.publishNow(p);
      // After a server restart the session is new (sessionPresent 0) but
      // our delivery position is kept: subscribing again resumes it.
      // Online, and the catch-up that 'connected' starts, only once the
      // subscription is granted: from then on every change arrives as an
      // event, and the inbox read after it holds everything before. Before
      // the SUBACK the server has nowhere to deliver a membership event.
      c.subscribe(this.eventsTopic, { qos: 1 }, (err, granted) => {
        const refused = err || !granted || granted.some((g) => g.qos >= 0x80);
        if (refused) {
          this.emit('error', new Error('subscription to events refused'));
          return;
        }
        this.emit('status', 'online');
        this.emit('connected', { first: this.connects === 1, sessionPresent: !!connack.sessionPresent });
      });
    });
    // The browser says its network is back (out of a tunnel, a lift,
    // airplane mode): the connection from before it went is most likely
    // dead without having been closed, and mqtt.js would learn so only
    // from its keep-alive, up to 45 s later, with messages waiting. Drop it
    // and reconnect now; mqtt.js resends what is unacknowledged.
    if (typeof addEventListener === 'function') {
      const onOnline = () => {
        if (this.client === c && c.connected) c.stream?.destroy();
      };
      addEventListener('online', onOnline);
      this.unwatch = () => removeEventListener('online', onOnline);
    }
    c.on('reconnect', () => this.emit('status', 'connecting'));
    c.on('offline', () => this.emit('status', 'offline'));
    this.failures = 0;
    c.on('close', () => {
      if (c.disconnecting) return;
      this.emit('status', 'offline');
      // mqtt.js has just (re)armed its reconnect timer, a fixed interval of
      // options.reconnectPeriod: set the period this failure calls for and
      // arm it again with it (its own _clearReconnect/_setupReconnect, as
      // its close handler uses them; mqtt.js is pinned in package-lock).
      const period = Math.max(reconnectDelay(++this.failures), retryAfterDelay(this.connackRetryAfter));
      this.connackRetryAfter = 0;
      // A client id on its way (0x85): the reconnect waits for it, and
      // takes this period then.
      if (this.renewing) return;
      c.options.reconnectPeriod = period;
      if (c.reconnectTimer) {
        c._clearReconnect();
        c._setupReconnect();
      }
    });
    c.on('error', (err) => {
      // 0x86 bad credentials / 0x87 not authorised: reconnecting cannot
      // help, the token expired or is not valid here.
      if (err && (err.code === 0x86 || err.code === 0x87 || err.code === 4 || err.code === 5)) {
        c.end(true);
        this.emit('unauthorized', err);
        return;
      }
      // 0x85 client identifier not valid (3.1.1's 0x02, as the 4 and 5
      // above): another user's session holds our client id. The token is
      // good: connect with an id of our own (docs/mobile.md).
      if (err && (err.code === 0x85 || err.code === 2)) {
        this.clientIdRefused(c, err);
        return;
      }
      this.emit('error', err);
    });
    c.on('message', (topic, payload) => {
      if (topic !== this.eventsTopic) return;
      let ev;
      try {
        ev = JSON.parse(new TextDecoder().decode(payload));
      } catch {
        return; // not ours to interpret; the contract says JSON
      }
      if (ev && typeof ev.type === 'string') this.emit('event', ev);
    });
  }

  /**
   * CONNACK 0x85 on connection c: claims another client id
   * (renewClientId) and reconnects with it, mqtt.js keeping what it
   * queued; at most MAX_CLIENT_ID_RENEWALS in a row, then the session
   * stops (status 'refused', event 'refused'). The new id is a new
   * session on the server (session present 0): the 'connected' that
   * follows starts the catch-up from the inbox, as after any session
   * loss, and we subscribe again on every CONNACK anyway.
   */
  clientIdRefused(c, err) {
    // mqtt.js arms its reconnect right after this handler, and our close
    // handler may have re-armed it: with a period of 0 neither does,
    // and no attempt goes out with the refused id.
    c._clearReconnect();
    c.options.reconnectPeriod = 0;
    if (this.renewing) return;
    if (!this.renewClientId || this.renewals >= MAX_CLIENT_ID_RENEWALS) {
      this.stopRefused(c, err);
      return;
    }
    this.renewals++;
    this.renewing = true;
    const refused = this.clientId;
    Promise.resolve()
      .then(() => this.renewClientId(refused))
      .then(
        (id) => {
          this.renewing = false;
          if (this.client !== c || c.disconnecting) return; // closed meanwhile
          if (typeof id !== 'string' || !id || id === refused) {
            this.stopRefused(c, err);
            return;
          }
          this.clientId = id;
          c.options.clientId = id;
          c.options.reconnectPeriod = reconnectDelay(Math.max(1, this.failures));
          if (!c.connected && !c.reconnectTimer) c._setupReconnect();
        },
        () => {
          this.renewing = false;
          if (this.client === c && !c.disconnecting) this.stopRefused(c, err);
        },
      );
  }

  /**
   * The server refuses our client ids: no more attempts. The user stays
   * signed in (the token is good) and what is unsent stays in the
   * outbox for a later page; what waited for the first CONNACK, and
   * what mqtt.js held for the next connection (sent offline), is
   * answered "not sent".
   */
  stopRefused(c, err) {
    this.refused = err;
    try {
      this.forgetClientId?.(this.clientId);
    } catch {
      // Storage unavailable: a later page may be refused it once more.
    }
    // Ended with a period of 0, mqtt.js would count the client as no
    // longer disconnecting once its stores close, and our close handler
    // would report it offline, reconnecting.
    c.options.reconnectPeriod = reconnectDelay(1);
    c.end(true);
    for (const p of this.early.splice(0)) p.reject(refusedError());
    // mqtt.js ended without a flush (reconnectPeriod set, clean false):
    // it keeps their callbacks for a connection that never comes.
    for (const reject of this.handed) reject(refusedError());
    this.handed.clear();
    this.emit('status', 'refused');
    this.emit('refused', err);
  }

  /**
   * Publishes a message at QoS 1. Resolves with the committed seq from the
   * PUBACK's user property (the server commits before it acks); rejects
   * with a SendError carrying the reason code (and, refused for a rate
   * limit, its retryAfter). mqtt.js queues the publish
   * while offline and sends it on reconnect. `extra` adds the optional
   * fields of a send: replyTo, forward.
   */
  send(cid, clientMsgId, body, extra = {}) {
    return this.publishEntry(cid, 'msg', { clientMsgId, body, ...extra });
  }

  /**
   * Publishes an edit, recall or reaction (topic `edit`, `recall` or
   * `react`; docs/protocol.md "Message lifecycle"), like send: resolves
   * with the entry's seq (null for a reaction that changed nothing).
   */
  change(cid, topic, payload) {
    return this.publishEntry(cid, topic, payload);
  }

  publishEntry(cid, topic, body) {
    const payload = JSON.stringify(body);
    const name = `chat/v1/conv/${cid}/${topic}`;
    return new Promise((resolve, reject) => {
      if (!this.client) {
        reject(new SendError('Signed out.', undefined));
        return;
      }
      if (this.refused) {
        reject(refusedError());
        return;
      }
      const p = { name, payload, resolve, reject };
      // Before the first CONNACK the server's packet limit is unknown:
      // handed to mqtt.js now, an oversized publish would go out unchecked
      // as soon as the connection is up.
      if (this.connects === 0) this.early.push(p);
      else this.publishNow(p);
    });
  }

  /** Publishes (or queues in mqtt.js while offline) one publishEntry. */
  publishNow({ name, payload, resolve, reject }) {
    // MQTT 5 forbids sending a packet over the server's limit, and chatd
    // drops the connection of a client that does; mqtt.js would then
    // send it again on every reconnection, ahead of every later publish.
    const size = publishSize(name, payload);
    if (this.maxPacket && size > this.maxPacket) {
      reject(new SendError(`Too long to send (${size} bytes; the server accepts at most ${this.maxPacket}).`, 0x95));
      return;
    }
    const acks = this.acks;
    this.handed.add(reject);
    this.client.publish(name, payload, { qos: 1 }, (err, packet) => {
      this.handed.delete(reject);
      const id = packet?.messageId;
      const props = acks.get(id) || packet?.properties || {};
      acks.delete(id);
      if (err) {
        const code = err.code ?? packet?.reasonCode;
        const retryAfter = retryAfterSeconds(userProp(props.userProperties, 'retryAfter'));
        reject(new SendError(props.reasonString || err.message, typeof code === 'number' ? code : undefined, retryAfter));
        return;
      }
      const seq = Number(userProp(props.userProperties, 'seq'));
      resolve({
        seq: Number.isSafeInteger(seq) && seq > 0 ? seq : null,
        duplicate: userProp(props.userProperties, 'duplicate') === 'true',
        unchanged: userProp(props.userProperties, 'unchanged') === 'true',
      });
    });
  }

  /** "I am typing": QoS 0, not stored; dropped while offline on purpose. */
  typing(cid) {
    if (!this.client || !this.client.connected) return;
    this.client.publish(`chat/v1/conv/${cid}/typing`, '{}', { qos: 0 });
  }

  /**
   * Disconnects. With endSession (signing out) the DISCONNECT sets the
   * session expiry to 0, so the server drops the session instead of keeping
   * it, and its queue, for a day.
   */
  close({ endSession = false } = {}) {
    const c = this.client;
    this.client = null;
    this.unwatch?.();
    for (const p of this.early.splice(0)) p.reject(new SendError('Signed out.', undefined));
    if (!c) return;
    if (endSession && c.connected) c.end(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    else c.end(true);
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }
}

/**
 * The size in bytes of a QoS 1 MQTT 5 PUBLISH of payload on topic without
 * properties, as mqtt.js writes it: fixed header, Remaining Length, topic,
 * packet id, an empty property length, payload.
 */
export function publishSize(topic, payload) {
  const enc = new TextEncoder();
  const rest = 2 + enc.encode(topic).length + 2 + 1 + enc.encode(payload).length;
  let lenBytes = 1;
  for (let n = rest; n >= 128; n = Math.floor(n / 128)) lenBytes++;
  return 1 + lenBytes + rest;
}

/** A send after the server refused every client id (stopRefused). */
function refusedError() {
  return new SendError('Not sent: the server refused this browser\'s connection. Reload the page to try again.', undefined);
}

/** mqtt.js gives a user property as a string, or an array if repeated. */
function userProp(props, name) {
  if (!props) return undefined;
  const v = props[name];
  return Array.isArray(v) ? v[v.length - 1] : v;
}
