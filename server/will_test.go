package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// forged is what an attacker would like its victims to receive: a
// message.new from someone else, in a conversation the attacker is not in.
func forged(victim int64) []byte {
	return fmt.Appendf(nil, `{"type":"message.new","conversationId":1,"seq":1,"senderId":%d,"clientMsgId":"6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11","body":"FORGED: send me your password"}`, victim+1)
}

// dialVia connects over TCP or, with ws, over the WebSocket at /mqtt.
func dialVia(t *testing.T, srv *server.Server, ws bool, o mqtttest.Options) (*mqtttest.Client, packets.Packet, error) {
	t.Helper()
	if !ws {
		return mqtttest.Dial(srv.MQTTAddr(), o)
	}
	conn, _, err := mqtttest.DialWS("ws://"+srv.HTTPAddr()+"/mqtt", "")
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	return mqtttest.DialConn(conn, o)
}

// watcher records what a victim's connection receives.
type watcher struct {
	name string
	mu   sync.Mutex
	got  []packets.Packet
}

func watch(name string, c *mqtttest.Client) *watcher {
	w := &watcher{name: name}
	go func() {
		for pk := range c.Publishes {
			w.mu.Lock()
			w.got = append(w.got, pk)
			w.mu.Unlock()
		}
	}()
	return w
}

// has reports whether a publish whose payload contains s arrived.
func (w *watcher) has(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pk := range w.got {
		if strings.Contains(string(pk.Payload), s) {
			return true
		}
	}
	return false
}

// unexpected lists what arrived that is not a chat event of the victim's
// own events topic carrying sentinel.
func (w *watcher) unexpected(topic, sentinel string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var bad []string
	for _, pk := range w.got {
		if pk.TopicName != topic || pk.FixedHeader.Retain || !strings.Contains(string(pk.Payload), sentinel) {
			bad = append(bad, fmt.Sprintf("%s retain=%v %.120s", pk.TopicName, pk.FixedHeader.Retain, pk.Payload))
		}
	}
	return bad
}

// victims connects user's v5 and v3.1.1 devices over TCP and WebSocket,
// all subscribed to the user's events.
func victims(t *testing.T, srv *server.Server, user int64) []*watcher {
	t.Helper()
	var ws []*watcher
	for _, ws_ := range []bool{false, true} {
		for _, v := range []byte{5, 4} {
			name := fmt.Sprintf("v%d tcp", v)
			if ws_ {
				name = fmt.Sprintf("v%d websocket", v)
			}
			c, _, err := dialVia(t, srv, ws_, mqtttest.Options{Version: v, ClientID: fmt.Sprintf("victim-%d-%s", user, strings.ReplaceAll(name, " ", "-")),
				Password: testnode.Token(t, user), Clean: true})
			if err != nil {
				t.Fatalf("victim %s: %v", name, err)
			}
			t.Cleanup(c.Drop)
			if codes, err := c.Subscribe(testnode.EventsTopic(user), fmt.Sprintf("chat/v1/user/%d/#", user)); err != nil || len(codes) != 2 || codes[0] >= 0x80 || codes[1] >= 0x80 {
				t.Fatalf("victim %s subscribe: %v %v", name, codes, err)
			}
			ws = append(ws, watch(name, c))
		}
	}
	return ws
}

// anyHas reports whether any watcher received a payload containing s.
func anyHas(ws []*watcher, s string) bool {
	for _, w := range ws {
		if w.has(s) {
			return true
		}
	}
	return false
}

// sentinelThrough sends a real message to the victims and waits until all
// have it: whatever an attack delivered would have arrived by now.
func sentinelThrough(t *testing.T, srv *server.Server, conv, sender int64, ws []*watcher, sentinel string) {
	t.Helper()
	mustSendAs(t, srv, conv, sender, sentinel)
	for _, w := range ws {
		testkit.WaitFor(t, 10*time.Second, w.name+" to receive the sentinel", func() bool { return w.has(sentinel) })
	}
}

// A Will is published by mochi straight to the subscribers of its topic,
// past OnPublish and the publish ACL. A user who shares nothing with the
// victim must not be able to make a forged event appear on the victim's
// devices (v5, 3.1.1, TCP, WebSocket) by any of the Will's triggers: a
// dropped socket, a session takeover, the Will Delay timer. The server
// refuses every CONNECT with a Will: v5 0x87 (a retained Will 0x9A, a QoS 2
// Will 0x9B), 3.1.1 0x05.
func TestConnectWithAWillIsRefusedAndNoWillReachesAnySubscriber(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	const victim, friend, attacker = 2, 3, 1
	conv := mustDirect(t, context.Background(), srv, victim, friend)
	ws := victims(t, srv, victim)

	type attempt struct {
		name    string
		will    mqtttest.Will
		trigger string // drop, takeover, delay
		v5, v3  byte   // expected CONNACK
	}
	var attempts []attempt
	for _, topic := range []string{testnode.EventsTopic(victim), fmt.Sprintf("chat/v1/user/%d/rpc", victim), "chat/v1/conv/1/msg"} {
		attempts = append(attempts,
			attempt{"on " + topic + ", socket dropped", mqtttest.Will{Topic: topic, Payload: forged(victim), QoS: 1}, "drop", 0x87, 0x05},
			attempt{"on " + topic + ", session taken over", mqtttest.Will{Topic: topic, Payload: forged(victim), QoS: 0}, "takeover", 0x87, 0x05},
		)
	}
	attempts = append(attempts,
		attempt{"with a 1 s Will Delay", mqtttest.Will{Topic: testnode.EventsTopic(victim), Payload: forged(victim), QoS: 1, Delay: 1}, "delay", 0x87, 0x05},
		attempt{"retained", mqtttest.Will{Topic: testnode.EventsTopic(victim), Payload: forged(victim), QoS: 1, Retain: true}, "drop", 0x9A, 0x05},
		attempt{"at QoS 2", mqtttest.Will{Topic: testnode.EventsTopic(victim), Payload: forged(victim), QoS: 2}, "drop", 0x9B, 0x05},
	)
	n := 0
	for _, a := range attempts {
		for _, overWS := range []bool{false, true} {
			for _, v := range []byte{5, 4} {
				n++
				how := fmt.Sprintf("v%d %s Will %s", v, map[bool]string{false: "TCP", true: "WebSocket"}[overWS], a.name)
				o := mqtttest.Options{Version: v, ClientID: fmt.Sprintf("will-attacker-%d", n), Password: testnode.Token(t, attacker), Clean: true, Will: a.will}
				if v == 5 {
					o.Expiry = 60 // the Will Delay applies to a session that outlives its connection
				}
				c, ack, err := dialVia(t, srv, overWS, o)
				want := a.v5
				if v == 4 {
					want = a.v3
				}
				if err == nil {
					t.Errorf("%s: CONNECT accepted, want CONNACK 0x%02x", how, want)
					switch a.trigger {
					case "takeover":
						o.Will = mqtttest.Will{}
						if c2, _, err := dialVia(t, srv, overWS, o); err == nil {
							t.Cleanup(c2.Drop)
						}
					default:
						c.Drop()
					}
					continue
				}
				if ack.ReasonCode != want {
					t.Errorf("%s: CONNACK 0x%02x (%v), want 0x%02x", how, ack.ReasonCode, err, want)
				}
				if v == 5 && ack.Properties.ReasonString == "" {
					t.Errorf("%s: CONNACK 0x%02x without a reason string", how, ack.ReasonCode)
				}
			}
		}
	}
	// The Will Delay timer runs once a second: watch two of its rounds,
	// then prove the victims' connections deliver.
	testkit.Never(t, 2500*time.Millisecond, "a victim received a forged event", func() bool { return anyHas(ws, "FORGED") })
	sentinelThrough(t, srv, conv.ID, friend, ws, "sentinel after the Will attacks")
	for _, w := range ws {
		if bad := w.unexpected(testnode.EventsTopic(victim), "sentinel after the Will attacks"); len(bad) > 0 {
			t.Errorf("victim's %s device received what the attacker's Wills carried: %q", w.name, bad)
		}
	}
}

// The other mochi paths that deliver without OnPublish or the ACL stay
// shut: the inline client is disabled, $SYS (published by mochi every
// second) reaches nobody, nothing is retained, and a session takeover by
// another user is refused, so nobody replays someone else's session.
func TestNoMochiPathDeliversAroundTheChatACL(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	const victim, friend, attacker = 2, 3, 1
	conv := mustDirect(t, context.Background(), srv, victim, friend)
	ws := victims(t, srv, victim)

	if err := srv.Broker.Server.Publish(testnode.EventsTopic(victim), forged(victim), false, 1); !errors.Is(err, mqtt.ErrInlineClientNotEnabled) {
		t.Errorf("inline publish: %v, want ErrInlineClientNotEnabled", err)
	}
	if err := srv.Broker.Server.Subscribe("#", 1, func(*mqtt.Client, packets.Subscription, packets.Packet) {}); !errors.Is(err, mqtt.ErrInlineClientNotEnabled) {
		t.Errorf("inline subscribe: %v, want ErrInlineClientNotEnabled", err)
	}

	for _, v := range []byte{5, 4} {
		c := rawClient(t, srv.MQTTAddr(), victim, fmt.Sprintf("sys-watcher-v%d", v), v, true)
		want := byte(0x87)
		if v == 4 {
			want = 0x80
		}
		for _, f := range []string{"$SYS/#", "$SYS/broker/clients/connected", "#", "+/#"} {
			if codes, err := c.Subscribe(f); err != nil || len(codes) != 1 || codes[0] != want {
				t.Errorf("v%d subscribe %q: %v %v, want 0x%02x", v, f, codes, err, want)
			}
		}
		ws = append(ws, watch(fmt.Sprintf("v%d $SYS watcher", v), c))

		// A retained publish to the victim's own events topic is refused,
		// and the retain flag of an accepted send is ignored.
		a := rawClient(t, srv.MQTTAddr(), friend, fmt.Sprintf("retainer-v%d", v), v, true)
		if ack, err := a.Publish(testnode.EventsTopic(victim), 1, forged(victim), mqtttest.PublishOpts{Retain: true}); err != nil || (v == 5 && ack.ReasonCode != 0x87) {
			t.Errorf("v%d retained publish to another user's events: 0x%02x %v, want 0x87", v, ack.ReasonCode, err)
		}
		if ack, err := a.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "retain ignored"), mqtttest.PublishOpts{Retain: true}); err != nil || ack.ReasonCode != 0 {
			t.Errorf("v%d retained send: 0x%02x %v, want a plain send", v, ack.ReasonCode, err)
		}
	}
	late := rawClient(t, srv.MQTTAddr(), victim, "late-subscriber", 5, true)
	lateW := watch("late subscriber", late)

	for _, v := range []byte{5, 4} {
		_, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("victim-%d-v%d-tcp", victim, v), Password: testnode.Token(t, attacker), Clean: false, Expiry: expiryFor(v, false)})
		want := byte(0x85) // client identifier not valid (protocol.md "Every refused CONNECT")
		if v == 4 {
			want = 0x02
		}
		if err == nil || ack.ReasonCode != want {
			t.Errorf("v%d takeover of the victim's client id by another user: CONNACK 0x%02x %v, want 0x%02x", v, ack.ReasonCode, err, want)
		}
	}

	// $SYS is republished every second: watch two rounds.
	all := append(ws, lateW)
	testkit.Never(t, 2500*time.Millisecond, "a $SYS, retained or forged publish arrived", func() bool {
		for _, w := range all {
			for _, s := range w.unexpected(testnode.EventsTopic(victim), "") {
				if strings.HasPrefix(s, "$") || strings.Contains(s, "retain=true") || strings.Contains(s, "FORGED") {
					return true
				}
			}
		}
		return false
	})
	sentinelThrough(t, srv, conv.ID, friend, all, "sentinel after the bypass attempts")
	for _, w := range all {
		var bad []string
		for _, s := range w.unexpected(testnode.EventsTopic(victim), "") {
			if strings.HasPrefix(s, "$") || strings.Contains(s, "retain=true") || strings.Contains(s, "FORGED") {
				bad = append(bad, s)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s received around the ACL: %q", w.name, bad)
		}
	}
}
