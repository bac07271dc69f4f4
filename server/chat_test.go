package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

func countMessages(t *testing.T, pool *pgxpool.Pool, conv int64) int {
	t.Helper()
	return pgtest.QueryOne[int](t, pool, "SELECT count(*) FROM message WHERE conversation_id = $1", conv)
}

func TestDirectAndGroupMembersReceiveEveryMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	direct := mustDirect(t, ctx, srv, 1, 2)
	group := mustGroup(t, ctx, srv, 1, "five", []int64{2, 3, 4, 5})
	clients := map[int64]*pahoClient{}
	for u := int64(1); u <= 5; u++ {
		clients[u] = newPaho(t, srv.MQTTAddr(), u, fmt.Sprintf("dev-%d", u))
	}
	const perSender = 20
	var wg sync.WaitGroup
	for u := int64(1); u <= 5; u++ {
		wg.Go(func() {
			for i := 0; i < perSender; i++ {
				conv := group.ID
				if u <= 2 && i%2 == 0 {
					conv = direct.ID
				}
				pr, err := clients[u].Publish(ctx, &paho.Publish{Topic: testnode.MsgTopic(conv), QoS: 1, Payload: testnode.SendPayload(newID(), fmt.Sprintf("u%d m%d", u, i))})
				if err != nil {
					t.Errorf("user %d publish: %v", u, err)
					return
				}
				if pr.Properties == nil || pr.Properties.User.Get("seq") == "" {
					t.Errorf("v5 PUBACK carries no seq user property")
				}
			}
		})
	}
	wg.Wait()
	directN := int(countMessages(t, srv.Pool, direct.ID))
	groupN := int(countMessages(t, srv.Pool, group.ID))
	if directN != perSender || groupN != 5*perSender-perSender {
		t.Fatalf("stored direct=%d group=%d", directN, groupN)
	}
	for u := int64(1); u <= 5; u++ {
		pc := clients[u]
		testkit.WaitFor(t, 45*time.Second, fmt.Sprintf("user %d to receive all group messages", u), func() bool { return len(pc.messages(group.ID)) >= groupN })
		assertInOrder(t, pc.messages(group.ID), 1)
		if u <= 2 {
			testkit.WaitFor(t, 45*time.Second, "direct messages", func() bool { return len(pc.messages(direct.ID)) >= directN })
			assertInOrder(t, pc.messages(direct.ID), 1)
		} else if n := len(pc.messages(direct.ID)); n != 0 {
			t.Fatalf("user %d outside the direct chat received %d of its messages", u, n)
		}
	}
	// Nothing more arrives: exactly once.
	time.Sleep(200 * time.Millisecond)
	for u := int64(1); u <= 5; u++ {
		if n := len(clients[u].messages(group.ID)); n != groupN {
			t.Fatalf("user %d received %d group messages, want exactly %d", u, n, groupN)
		}
	}
}

func TestResendAfterLostPubackStoresOnceWithSameSeq(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	for _, v := range []byte{4, 5} {
		id := newID()
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("lossy-%d", v), Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		before := countMessages(t, srv.Pool, conv.ID)
		// Publish and drop the connection at once: the PUBACK is lost.
		go func() { _, _ = c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(id, "hello")) }()
		testkit.WaitFor(t, 5*time.Second, "the first attempt to commit", func() bool { return countMessages(t, srv.Pool, conv.ID) == before+1 })
		c.Drop()
		c2, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("lossy-%d", v), Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		ack, err := c2.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(id, "hello"))
		if err != nil || ack.ReasonCode >= 0x80 {
			t.Fatalf("resend: %v reason 0x%x", err, ack.ReasonCode)
		}
		if got := countMessages(t, srv.Pool, conv.ID); got != before+1 {
			t.Fatalf("v%d: resend stored a second row: %d messages", v, got)
		}
		if v == 5 {
			want := fmt.Sprint(before + 1)
			if seq := userProp(ack.Properties.User, "seq"); seq != want {
				t.Fatalf("resend got seq %q, want the original %s", seq, want)
			}
		}
		c2.Disconnect()
	}
}

func userProp(props []packets.UserProperty, key string) string {
	for _, p := range props {
		if p.Key == key {
			return p.Val
		}
	}
	return ""
}

func TestAuthorizationRefusalsStoreAndLeakNothing(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "private", []int64{2})
	addr := srv.MQTTAddr()
	badTokens := map[string]string{
		"wrong secret": mintWith(t, "another-secret-0123456789abcdef0123", 1, time.Hour),
		"expired":      mintWith(t, testnode.Secret, 1, -time.Hour),
		"alg none":     "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiIxIiwiZXhwIjo0MTAyNDQ0ODAwfQ.",
		"garbage":      "not-a-jwt",
	}
	for name, tok := range badTokens {
		for _, v := range []byte{4, 5} {
			_, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: v, ClientID: "bad-" + fmt.Sprint(v), Password: tok, Clean: true})
			want := byte(0x86)
			if v == 4 {
				want = 0x05
			}
			if err == nil || ack.ReasonCode != want {
				t.Fatalf("%s v%d: want CONNACK 0x%02x, got 0x%02x (%v)", name, v, want, ack.ReasonCode, err)
			}
		}
	}
	// Username must match the token's subject.
	if _, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "u-mismatch", Username: "2", Password: testnode.Token(t, 1), Clean: true}); err == nil || ack.ReasonCode != 0x86 {
		t.Fatalf("username mismatch accepted: 0x%02x", ack.ReasonCode)
	}
	// Another user's client id: refused as an identifier the server does
	// not allow (v5 0x85, 3.1.1 0x02), the token being good; owner's
	// session untouched.
	owner := rawClient(t, addr, 1, "phone-of-1", 5, false)
	if _, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "phone-of-1", Password: testnode.Token(t, 3), Clean: false, Expiry: 60}); err == nil || ack.ReasonCode != 0x85 {
		t.Fatalf("takeover by another user: 0x%02x %v", ack.ReasonCode, err)
	}
	if owner.Closed() {
		t.Fatal("refused takeover disconnected the owner")
	}
	owner.Drop()
	// Offline persistent session: still refused (ownership is in PostgreSQL).
	testkit.WaitFor(t, 5*time.Second, "owner offline", func() bool { return srv.Hub.Session("phone-of-1") == nil })
	if _, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: 4, ClientID: "phone-of-1", Password: testnode.Token(t, 3), Clean: false}); err == nil || ack.ReasonCode != 0x02 {
		t.Fatalf("offline session taken by another user: 0x%02x %v", ack.ReasonCode, err)
	}
	// Subscriptions outside one's own tree.
	intruder, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "intruder", Password: testnode.Token(t, 3), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Drop()
	for _, f := range []string{testnode.EventsTopic(1), "chat/v1/#", "#", "chat/v1/user/+/events", "chat/v1/conv/" + fmt.Sprint(conv.ID) + "/msg", "$SYS/#"} {
		codes, err := intruder.Subscribe(f)
		if err != nil || len(codes) != 1 || codes[0] != 0x87 {
			t.Fatalf("subscribe %q: want 0x87, got %v %v", f, codes, err)
		}
	}
	// Publishing into a conversation one is not a member of.
	ack, err := intruder.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "let me in"))
	if err != nil || ack.ReasonCode != 0x87 {
		t.Fatalf("non-member publish: want 0x87, got 0x%02x %v", ack.ReasonCode, err)
	}
	// Publishing to another user's events topic is refused, not routed.
	victim := rawClient(t, addr, 2, "victim", 5, true)
	ack, err = intruder.Publish(testnode.EventsTopic(2), 1, []byte(`{"type":"message.new","body":"spoof"}`), mqtttest.PublishOpts{Retain: true})
	if err != nil || ack.ReasonCode != 0x87 {
		t.Fatalf("publish to another user's events: want 0x87, got 0x%02x %v", ack.ReasonCode, err)
	}
	select {
	case pk := <-victim.Publishes:
		t.Fatalf("spoofed event reached the victim: %s", pk.Payload)
	case <-time.After(300 * time.Millisecond):
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 0 {
		t.Fatalf("refused publishes stored %d messages", n)
	}
}

func TestBadPayloadsGetTheirDocumentedOutcomeAndConnectionStaysUsable(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_BODY_BYTES": "1024"})
	ctx := context.Background()
	conv := mustDirect(t, ctx, srv, 1, 2)
	other := mustDirect(t, ctx, srv, 2, 3)
	cases := []struct {
		name    string
		topic   string
		payload []byte
		v5      byte
		code    chat.Code
	}{
		{"bad json", testnode.MsgTopic(conv.ID), []byte(`{"clientMsgId":`), 0x99, chat.CodeInvalid},
		{"not an object", testnode.MsgTopic(conv.ID), []byte(`[1,2]`), 0x99, chat.CodeInvalid},
		{"unknown field", testnode.MsgTopic(conv.ID), []byte(`{"clientMsgId":"` + newID() + `","body":"x","admin":true}`), 0x99, chat.CodeInvalid},
		{"a field name in another case", testnode.MsgTopic(conv.ID), []byte(`{"clientMsgId":"` + newID() + `","BODY":"x"}`), 0x99, chat.CodeInvalid},
		{"a field given twice", testnode.MsgTopic(conv.ID), []byte(`{"clientMsgId":"` + newID() + `","body":"x","body":"y"}`), 0x99, chat.CodeInvalid},
		{"missing clientMsgId", testnode.MsgTopic(conv.ID), []byte(`{"body":"hi"}`), 0x99, chat.CodeInvalid},
		{"invalid clientMsgId", testnode.MsgTopic(conv.ID), testnode.SendPayload("12345", "hi"), 0x99, chat.CodeInvalid},
		{"empty body", testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), ""), 0x99, chat.CodeInvalid},
		{"oversize body", testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), strings.Repeat("x", 1025)), 0x99, chat.CodeTooLarge},
		{"invalid utf-8", testnode.MsgTopic(conv.ID), []byte("{\"clientMsgId\":\"" + newID() + "\",\"body\":\"\xff\xfe\"}"), 0x99, chat.CodeInvalid},
		{"not a member", testnode.MsgTopic(other.ID), testnode.SendPayload(newID(), "hi"), 0x87, chat.CodeNotMember},
		{"unknown conversation", testnode.MsgTopic(999999), testnode.SendPayload(newID(), "hi"), 0x87, chat.CodeNotFound},
		{"unknown topic", "chat/v1/conv/1/delete", []byte(`{}`), 0x87, chat.CodeForbidden},
		{"bad read seq", testnode.ReadTopic(conv.ID), []byte(`{"seq":-1}`), 0x99, chat.CodeInvalid},
		{"bad conversation id", "chat/v1/conv/01/msg", testnode.SendPayload(newID(), "hi"), 0x87, chat.CodeForbidden},
	}
	for _, v := range []byte{5, 4} {
		c := rawClient(t, srv.MQTTAddr(), 1, fmt.Sprintf("bad-payloads-%d", v), v, true)
		for _, tc := range cases {
			ack, err := c.Publish(tc.topic, 1, tc.payload)
			if err != nil {
				t.Fatalf("v%d %s: %v", v, tc.name, err)
			}
			if v == 5 {
				if ack.ReasonCode != tc.v5 {
					t.Fatalf("v5 %s: reason 0x%02x, want 0x%02x", tc.name, ack.ReasonCode, tc.v5)
				}
				if ack.Properties.ReasonString == "" {
					t.Fatalf("v5 %s: no reason string", tc.name)
				}
				continue
			}
			if ack.ReasonCode != 0 {
				t.Fatalf("v3.1.1 %s: want ack-and-drop, got 0x%02x", tc.name, ack.ReasonCode)
			}
			ev := nextEvent(t, c, chat.EventError, 5*time.Second)
			if ev.Code != string(tc.code) || ev.Message == "" {
				t.Fatalf("v3.1.1 %s: error event %+v, want code %s", tc.name, ev, tc.code)
			}
		}
		if n := countMessages(t, srv.Pool, conv.ID); n != int(5-v) {
			// one good message per earlier round
			t.Fatalf("bad payloads stored messages: %d", n)
		}
		// The connection is still usable.
		ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "still here"))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("v%d: good publish after bad ones: 0x%02x %v", v, ack.ReasonCode, err)
		}
		ev := nextEvent(t, c, chat.EventMessageNew, 5*time.Second)
		if ev.Body != "still here" {
			t.Fatalf("v%d: own message.new not delivered: %+v", v, ev)
		}
		c.Disconnect()
	}
}

func mintWith(t *testing.T, secret string, user int64, ttl time.Duration) string {
	t.Helper()
	now := time.Now() // a negative ttl gives an expired token
	return signedToken(t, secret, user, now, now.Add(ttl))
}

// Every QoS 1 publish to a $-topic is refused exactly once: one PUBACK
// (0x87 for v5), and for v3.1.1 one forbidden error event. mochi drops
// some of them before any publish hook ($SYS…, a bare $share or
// $share/group) and passes the others ($foo, $share/group/topic) on to
// OnPublish; neither kind may be answered twice (a second PUBACK with the
// same packet id would acknowledge the client's next publish that reuses
// it). A refused send to a conversation the user is not in closes the
// sequence: its PUBACK (and v3.1.1 error event, which names it) comes
// after every earlier answer.
func TestDollarTopicPublishIsRefusedExactlyOnce(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	topics := []string{"$foo/bar", "$share/g/chat/v1/conv/1/msg", "$SYS/broker/x", "$share/g", "$share"}
	for _, v := range []byte{5, 4} {
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("dollar-v%d", v), Password: testnode.Token(t, 3), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		if codes, err := c.Subscribe(testnode.EventsTopic(3)); err != nil || codes[0] >= 0x80 {
			t.Fatalf("subscribe: %v %v", codes, err)
		}
		for _, topic := range topics {
			ack, err := c.Publish(topic, 1, []byte(`{}`))
			if err != nil || (v == 5 && ack.ReasonCode != 0x87) {
				t.Fatalf("v%d publish to %s: PUBACK 0x%02x %v, want 0x87", v, topic, ack.ReasonCode, err)
			}
		}
		marker := newID()
		if _, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(marker, "not a member")); err != nil {
			t.Fatal(err)
		}
		if got := c.AckOrder(); len(got) != len(topics)+1 {
			t.Fatalf("v%d: %d PUBACKs for %d publishes (packet ids %v)", v, len(got), len(topics)+1, got)
		}
		if v == 4 {
			denied := 0
			nextPublish(t, c, "the error event of the last publish", 10*time.Second, func(pk packets.Packet) bool {
				var ev event
				_ = json.Unmarshal(pk.Payload, &ev)
				if ev.ClientMsgID == marker {
					return true
				}
				if ev.Type == chat.EventError && ev.Code == string(chat.CodeForbidden) {
					denied++
				}
				return false
			})
			if denied != len(topics) {
				t.Fatalf("v3.1.1: %d forbidden error events for %d refused $-topic publishes", denied, len(topics))
			}
		}
		c.Disconnect()
	}
}
