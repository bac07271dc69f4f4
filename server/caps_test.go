package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// An MQTT 5 client assumes what the CONNACK does not announce is available:
// the CONNACK says what chatd supports and enforces.
func TestV5ConnackAnnouncesTheServersRealCapabilities(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "caps", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Drop()
	p := ack.Properties
	checks := []struct {
		name      string
		got, want any
	}{
		{"Retain Available present", p.RetainAvailableFlag, true},
		{"Retain Available", p.RetainAvailable, byte(0)},
		{"Shared Subscription Available present", p.SharedSubAvailableFlag, true},
		{"Shared Subscription Available", p.SharedSubAvailable, byte(0)},
		{"Wildcard Subscription Available present", p.WildcardSubAvailableFlag, true},
		{"Wildcard Subscription Available (within the own tree)", p.WildcardSubAvailable, byte(1)},
		{"Subscription Identifiers Available present", p.SubIDAvailableFlag, true},
		{"Subscription Identifiers Available", p.SubIDAvailable, byte(0)},
		{"Maximum QoS present", p.MaximumQosFlag, true},
		{"Maximum QoS", p.MaximumQos, byte(1)},
		{"Topic Alias Maximum", p.TopicAliasMaximum, uint16(16)},
		// 64 KiB besides the body, 6 bytes of JSON per byte of the
		// default 16 KiB body, 4 KiB of PUBLISH.
		{"Maximum Packet Size", p.MaximumPacketSize, uint32(64<<10 + 6*16<<10 + 4<<10)},
		{"Receive Maximum", p.ReceiveMaximum, uint16(256)},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("CONNACK %s: %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// What a v5 client library reads from the CONNACK is what chatd does:
// paho, told wildcard subscriptions are available, subscribes with one
// (inside its own tree) and gets its events through it; told Subscription
// Identifiers and shared subscriptions are not, it sends neither (a client
// that sends them anyway: TestASubscribeWithASubscriptionIdentifierIsDisconnectedWith0xA1,
// TestASharedSubscriptionIsRefusedAsNotSupportedNotAsNotAuthorized).
func TestPahoReadsTheConnackAsChatdBehaves(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	pc, ca, got := dialPahoReceiving(t, srv.MQTTAddr(), 2, "caps-paho")
	if p := ca.Properties; p == nil || !p.WildcardSubAvailable || p.SubIDAvailable || p.SharedSubAvailable || p.RetainAvailable || p.MaximumQoS == nil || *p.MaximumQoS != 1 {
		t.Fatalf("paho read the CONNACK as %+v: want wildcards, no subscription identifiers, no shared subscriptions, no retain, maximum QoS 1", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := 7
	if _, err := pc.Subscribe(ctx, &paho.Subscribe{Properties: &paho.SubscribeProperties{SubscriptionIdentifier: &id},
		Subscriptions: []paho.SubscribeOptions{{Topic: testnode.EventsTopic(2), QoS: 1}}}); !errors.Is(err, paho.ErrInvalidArguments) {
		t.Errorf("paho sent a Subscription Identifier the CONNACK said is not available: %v", err)
	}
	if sa, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "chat/v1/user/2/+", QoS: 1}}}); err != nil || sa.Reasons[0] != 0x01 {
		t.Fatalf("wildcard subscription in the own tree: %+v %v", sa, err)
	}
	testkit.WaitFor(t, 5*time.Second, "the wildcard subscription to release delivery", func() bool { return srv.Hub.Ready("caps-paho") })
	mustSendAs(t, srv, conv.ID, 1, "through a wildcard")
	select {
	case pk := <-got:
		if pk.Topic != testnode.EventsTopic(2) || !strings.Contains(string(pk.Payload), "through a wildcard") || pk.Properties.SubscriptionIdentifier != nil {
			t.Fatalf("got %s on %s (subscription identifier %v)", pk.Payload, pk.Topic, pk.Properties.SubscriptionIdentifier)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event through the wildcard subscription")
	}
}

// TestASendWithinTheBodyLimitFitsAnMQTTPacketHoweverItsJSONEscapesIt: the
// Maximum Packet Size follows CHAT_MAX_BODY_BYTES, so a body within the
// limit whose JSON takes six bytes a byte (control characters; '<' as
// Go's encoder writes it), sent over TCP or WebSocket, is stored and
// delivered, not the reason the connection is closed; one a byte over
// the limit is refused too_large, the connection kept. A raised limit
// raises the packet size with it.
func TestASendWithinTheBodyLimitFitsAnMQTTPacketHoweverItsJSONEscapesIt(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, env map[string]string, limit int) {
		srv, conv := startDirect(t, env)
		peer := rawClient(t, srv.MQTTAddr(), 2, "escapes-2", 5, true)
		ws, _, err := mqtttest.DialWS("ws://"+srv.HTTPAddr()+"/mqtt", "")
		if err != nil {
			t.Fatal(err)
		}
		overWS, _, err := mqtttest.DialConn(ws, mqtttest.Options{Version: 5, ClientID: "escapes-ws", Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(overWS.Drop)
		senders := map[string]*mqtttest.Client{"tcp": rawClient(t, srv.MQTTAddr(), 1, "escapes-1", 5, true), "websocket": overWS}
		for name, sender := range senders {
			for i, body := range []string{strings.Repeat("\x01", limit), strings.Repeat("<", limit)} {
				payload := testnode.SendPayload(newID(), body)
				if len(payload) < 6*limit {
					t.Fatalf("body %d: the payload is %d bytes, not escaped", i, len(payload))
				}
				if rc, code, msg := reasonCode(t, sender, testnode.MsgTopic(conv.ID), payload); rc != 0 {
					t.Fatalf("%s, body %d (%d bytes of JSON): 0x%02x %s %s", name, i, len(payload), rc, code, msg)
				}
				if ev := nextEvent(t, peer, chat.EventMessageNew, 10*time.Second); ev.Body != body {
					t.Fatalf("%s, body %d: the peer got %d bytes", name, i, len(ev.Body))
				}
			}
			over := testnode.SendPayload(newID(), strings.Repeat("\x01", limit+1))
			if rc, code, _ := reasonCode(t, sender, testnode.MsgTopic(conv.ID), over); rc != 0x99 || code != "too_large" {
				t.Fatalf("%s, a body over the limit: 0x%02x %s", name, rc, code)
			}
			if sender.Closed() {
				t.Fatalf("%s: the sender's connection closed", name)
			}
		}
		if n := countMessages(t, srv.Pool, conv.ID); n != 4 {
			t.Fatalf("%d messages stored", n)
		}
	}
	t.Run("default limit", func(t *testing.T) { check(t, nil, chat.DefaultMaxBodyBytes) })
	t.Run("raised limit", func(t *testing.T) { check(t, map[string]string{"CHAT_MAX_BODY_BYTES": "65536"}, 65536) })
}

// A publish above the announced Maximum QoS (1) is what MQTT 5 calls a
// protocol error: DISCONNECT 0x9B, not a silent downgrade answered with a
// PUBACK the QoS 2 sender does not expect. 3.1.1 cannot be told a maximum
// or a reason: its connection is closed. Nothing is stored either way.
func TestQoS2PublishDisconnectsV5With0x9BAndClosesV311AndStoresNothing(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	for _, v := range []byte{5, 4} {
		c := rawClient(t, srv.MQTTAddr(), 1, fmt.Sprintf("qos2-v%d", v), v, true)
		ack, err := c.Publish(testnode.MsgTopic(conv.ID), 2, testnode.SendPayload(newID(), "at QoS 2"))
		if err == nil {
			t.Errorf("v%d QoS 2 publish answered with packet type %d reason 0x%02x; want the connection ended", v, ack.FixedHeader.Type, ack.ReasonCode)
		}
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("the v%d connection to close", v), c.Closed)
		pk, got := c.ServerDisconnect()
		if v == 5 && (!got || pk.ReasonCode != 0x9B) {
			t.Errorf("v5: DISCONNECT %v 0x%02x, want 0x9B (QoS not supported)", got, pk.ReasonCode)
		}
		if v == 4 && got {
			t.Errorf("v3.1.1: got DISCONNECT 0x%02x", pk.ReasonCode)
		}
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 0 {
		t.Errorf("QoS 2 publishes stored %d messages", n)
	}
}

// chatd delivers events at QoS 1 and moves delivered cursors and receipts
// on their PUBACKs, so a subscription asked at QoS 0 is granted QoS 1
// (SUBACK 0x01), not answered "granted QoS 0" and then sent QoS 1
// publishes, which MQTT forbids (delivery QoS is at most the granted one).
func TestASubscriptionAskedAtQoS0IsGrantedQoS1AndGetsEventsAtQoS1(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	for _, v := range []byte{5, 4} {
		id := fmt.Sprintf("qos0-v%d", v)
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: id, Username: "2",
			Password: testnode.Token(t, 2), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Drop)
		codes, err := c.SubscribeAt(0, testnode.EventsTopic(2))
		if err != nil || len(codes) != 1 || codes[0] != 0x01 {
			t.Fatalf("v%d: SUBACK %v %v for the events topic at QoS 0, want granted QoS 1 (0x01)", v, codes, err)
		}
		testkit.WaitFor(t, 5*time.Second, "the session to deliver", func() bool { return srv.Hub.Ready(id) })
		body := fmt.Sprint("to v", v)
		mustSendAs(t, srv, conv.ID, 1, body)
		pk := nextPublish(t, c, "the message", 10*time.Second, func(pk packets.Packet) bool { return strings.Contains(string(pk.Payload), body) })
		if pk.FixedHeader.Qos != 1 {
			t.Errorf("v%d: message.new at QoS %d, want 1", v, pk.FixedHeader.Qos)
		}
	}
}

// Topic aliases work within the announced maximum, one above it is a
// protocol error (DISCONNECT 0x94), and filters longer than the server
// keeps are refused.
func TestTopicAliasesWorkUpToTheMaximumAndLongFiltersAreRefused(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	c := rawClient(t, srv.MQTTAddr(), 1, "alias-user", 5, true)
	if ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "sets alias 16"), mqtttest.PublishOpts{TopicAlias: 16}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("publish setting alias 16: 0x%02x %v", ack.ReasonCode, err)
	}
	if ack, err := c.Publish("", 1, testnode.SendPayload(newID(), "uses alias 16"), mqtttest.PublishOpts{TopicAlias: 16}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("publish by alias 16: 0x%02x %v", ack.ReasonCode, err)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
		t.Fatalf("%d messages stored, want 2", n)
	}
	for _, v := range []byte{5, 4} {
		s := rawClient(t, srv.MQTTAddr(), 1, fmt.Sprintf("long-filter-v%d", v), v, true)
		want := byte(0x87)
		if v == 4 {
			want = 0x80
		}
		long := "chat/v1/user/1/" + strings.Repeat("x", 300)
		if codes, err := s.Subscribe(long); err != nil || len(codes) != 1 || codes[0] != want {
			t.Errorf("v%d subscribe to a %d-byte filter in the own tree: %v %v, want 0x%02x", v, len(long), codes, err, want)
		}
	}
	_, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "alias 17"), mqtttest.PublishOpts{TopicAlias: 17})
	if err == nil {
		t.Errorf("publish with alias 17 (maximum 16) was acknowledged")
	}
	testkit.WaitFor(t, 5*time.Second, "the connection to close", c.Closed)
	if pk, ok := c.ServerDisconnect(); !ok || pk.ReasonCode != 0x94 {
		t.Errorf("alias above the maximum: DISCONNECT %v 0x%02x, want 0x94 (topic alias invalid)", ok, pk.ReasonCode)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// mochi records a topic alias before OnPublish refuses the publish, and a
// parked persistent session keeps its aliases: 2,000 refused QoS 0
// publishes with 60 KiB topics, each setting a new alias, held ~120 MiB for
// as long as the session lived (when up to 65,535 aliases were allowed). Now no alias is recorded for a refused
// topic and aliases end with their connection: the heap comes back to
// within a few MiB of where it started.
func TestRefusedPublishesWithTopicAliasesLeaveTheHeapWhereItWas(t *testing.T) {
	const publishes, topicBytes = 2000, 60 << 10
	srv := startNode(t, pgtest.NewDB(t), nil)
	c := rawClient(t, srv.MQTTAddr(), 1, "alias-attacker", 5, false) // persistent: parked after it disconnects
	before := heapInUse()
	start := time.Now()
	pad := strings.Repeat("a", topicBytes)
	for i := 0; i < publishes; i++ {
		topic := fmt.Sprintf("chat/v1/x/%05d/%s", i, pad)
		// Aliases 1 to 16, the Topic Alias Maximum, each set again and again.
		if _, err := c.Publish(topic, 0, testnode.SendPayload(newID(), "x"), mqtttest.PublishOpts{TopicAlias: uint16(i%16 + 1)}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		// Each refused QoS 0 publish is answered with an error event: wait
		// for it, so the server has handled the publish before the next.
		ev := nextEvent(t, c, "error", 10*time.Second)
		if ev.Code != "forbidden" {
			t.Fatalf("publish %d: error event %q, want forbidden", i, ev.Code)
		}
	}
	took := time.Since(start)
	c.Disconnect()
	testkit.WaitFor(t, 5*time.Second, "the session to be parked", func() bool { return !srv.Hub.Ready("alias-attacker") })
	after := heapInUse()
	growth := int64(after) - int64(before)
	t.Logf("%d refused QoS 0 publishes with %d KiB topics and new aliases in %v: heap in use %.1f MiB before, %.1f MiB after the disconnect (%+.1f MiB)",
		publishes, topicBytes>>10, took.Round(time.Millisecond), float64(before)/(1<<20), float64(after)/(1<<20), float64(growth)/(1<<20))
	if growth > 8<<20 {
		t.Errorf("heap in use grew by %.1f MiB and stayed after the disconnect (bound 8 MiB)", float64(growth)/(1<<20))
	}
}

// A client's MQTT 5 Maximum Packet Size (an IoT device with little RAM)
// smaller than an event chatd has for it: the server must discard that
// packet and behave as if it had sent it (MQTT-3.1.2-25), not close the
// connection, which the client's reconnect would meet again at the same
// event, for ever. The event's seq is skipped, so the client sees a gap
// and fetches the entry through history (HTTP) as for any gap; events
// after it keep coming, on this connection and after a resume.
func TestAnEventLargerThanTheClientsMaximumPacketSizeIsSkippedNotAReconnectLoop(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	ctx := context.Background()
	dial := func() *mqtttest.Client {
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "tiny-device", Username: "2",
			Password: testnode.Token(t, 2), Clean: false, Expiry: 3600, Properties: packets.Properties{MaximumPacketSize: 1024}})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(c.Drop)
		return c
	}
	device := dial()
	if codes, err := device.Subscribe(testnode.EventsTopic(2)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	send := func(body string) int64 {
		t.Helper()
		res, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return res.Message.Seq
	}
	big := send(strings.Repeat("x", 4000))
	small := send("fits")
	got := collectMessages(t, device, conv.ID, 1, 10*time.Second)
	if got[0].Seq != small || got[0].Body != "fits" {
		t.Fatalf("got %+v, want seq %d (the one after the %d that does not fit)", got[0], small, big)
	}
	waitCursor(t, srv, "tiny-device", conv.ID, small)
	disconnect(t, srv, device, "tiny-device")
	after := send("also fits")
	again := dial()
	got = collectMessages(t, again, conv.ID, 1, 10*time.Second)
	if got[0].Seq != after {
		t.Fatalf("after a resume got seq %d, want %d", got[0].Seq, after)
	}
}

func alias(n uint16) *paho.PublishProperties { return &paho.PublishProperties{TopicAlias: &n} }

// MQTT 5 §3.3.2.3.4 and §4.13: a publish by a topic alias the connection
// never set (an empty topic) is a protocol error, DISCONNECT 0x82, not a
// publish to an empty topic refused with PUBACK 0x87 while the client goes
// on trusting an alias the server does not know; an alias of 0 is invalid,
// DISCONNECT 0x94, with a topic or without. The server sends the
// DISCONNECT, closes the connection and stores nothing.
func TestAPublishByATopicAliasNeverSetIsAProtocolErrorAndAlias0IsInvalid(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	cases := []struct {
		name  string
		topic string
		alias uint16
		want  byte
	}{
		{"an alias never set", "", 5, 0x82},
		{"alias 0 with a topic", testnode.MsgTopic(conv.ID), 0, 0x94},
		{"alias 0 without a topic", "", 0, 0x94},
	}
	for i, tc := range cases {
		pc, _ := dialPaho(t, srv.MQTTAddr(), 1, fmt.Sprintf("alias-invalid-%d", i), nil)
		if ack, err := pc.publish1(tc.topic, testnode.SendPayload(newID(), tc.name), alias(tc.alias)); err == nil || ack != nil {
			t.Errorf("%s: answered %+v %v, want the connection ended", tc.name, ack, err)
		}
		if d := pc.serverDisconnect(t, tc.name); d.ReasonCode != tc.want {
			t.Errorf("%s: DISCONNECT 0x%02x, want 0x%02x", tc.name, d.ReasonCode, tc.want)
		}
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 0 {
		t.Errorf("%d messages stored", n)
	}
}

// An alias the client sets again, to a topic the server refuses, stands
// for that topic from then on (§3.3.2.3.4): a publish by it is refused as
// the topic was (PUBACK 0x87, the connection kept), never delivered to the
// topic the alias stood for before.
func TestAnAliasSetAgainToARefusedTopicNoLongerReachesItsOldTopic(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	pc, _ := dialPaho(t, srv.MQTTAddr(), 1, "alias-reset", nil)
	if ack, err := pc.publish1(testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), "sets alias 1"), alias(1)); err != nil {
		t.Fatalf("publish setting alias 1: %+v %v", ack, err)
	}
	steps := []struct{ topic, body string }{
		{"chat/v1/nowhere", "sets alias 1 to a refused topic"},
		{"", "uses alias 1"},
	}
	for _, s := range steps {
		ack, _ := pc.publish1(s.topic, testnode.SendPayload(newID(), s.body), alias(1))
		if ack == nil || ack.ReasonCode != 0x87 {
			t.Fatalf("%s: %+v, want PUBACK 0x87", s.body, ack)
		}
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 1 {
		t.Errorf("%d messages stored, want only the first", n)
	}
}

// A PUBACK never exceeds the client's MQTT 5 Maximum Packet Size
// [MQTT-3.1.2-24]: mochi weighs the reason string and the user properties
// each against it on its own, so a refusal carrying both (a rate limit's:
// a sentence, code and retryAfter) was larger than a client announcing 100
// bytes accepts. The reason string, for people, is left out first; the
// machine-readable properties stay while they fit.
func TestAPubackNeverExceedsTheClientsMaximumPacketSize(t *testing.T) {
	t.Parallel()
	const maxSize = 100
	srv, conv := startDirect(t, map[string]string{"CHAT_LIMIT_SEND_RATE": "0.1", "CHAT_LIMIT_SEND_BURST": "1"})
	c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "small-acks", Password: testnode.Token(t, 1),
		Clean: true, Properties: packets.Properties{MaximumPacketSize: maxSize}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Drop)
	for i, want := range []byte{0x00, 0x97} {
		ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "hi"))
		if err != nil || ack.ReasonCode != want {
			t.Fatalf("send %d: 0x%02x %v, want 0x%02x", i, ack.ReasonCode, err, want)
		}
		// The PUBACK as it came: mochi's encoding is the server's.
		var buf bytes.Buffer
		ack.ProtocolVersion = 5
		if err := ack.PubackEncode(&buf); err != nil {
			t.Fatal(err)
		}
		if buf.Len() > maxSize {
			t.Errorf("PUBACK 0x%02x of %d bytes to a client whose Maximum Packet Size is %d (reason %q, properties %v)",
				ack.ReasonCode, buf.Len(), maxSize, ack.Properties.ReasonString, ack.Properties.User)
		}
		if code := userProp(ack.Properties.User, "code"); want == 0x97 && code != "rate_limited" {
			t.Errorf("PUBACK 0x97 without its code property: %v", ack.Properties.User)
		}
	}
}
