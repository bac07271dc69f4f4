package server_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// An RPC request names where its answer goes, and chatd must not become a
// way to publish into someone else's topics: a Response Topic outside the
// requester's own tree is refused (PUBACK 0x87, the reason naming the tree
// allowed) and answered nowhere, though another user is subscribed to it.
// One inside the own tree is answered to the requesting connection alone,
// whether or not it subscribed to that topic; another connection of the
// same user subscribed to the whole tree gets nothing.
func TestAnRPCIsAnsweredToItsRequesterAloneAndOnlyInItsOwnTree(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	asker, _, replies := dialPahoReceiving(t, srv.MQTTAddr(), 1, "rpc-asker")
	// User 2 subscribed to its whole tree, and another connection of user 1
	// to user 1's.
	onlookers := map[string]*mqtttest.Client{}
	for user, filter := range map[int64]string{2: "chat/v1/user/2/#", 1: "chat/v1/user/1/#"} {
		c, _ := dialAs(t, srv.MQTTAddr(), user, fmt.Sprint("rpc-onlooker-", user), 5, true)
		if codes, err := c.Subscribe(filter); err != nil || codes[0] != 0x01 {
			t.Fatalf("user %d subscribe %s: % x %v", user, filter, codes, err)
		}
		onlookers[filter] = c
	}

	for _, rt := range []string{"chat/v1/user/2/rpc", "chat/v1/user/2/events", "chat/v1/user/10/rpc"} {
		ack, _ := asker.publish1("chat/v1/rpc/me.get", []byte(`{}`), &paho.PublishProperties{ResponseTopic: rt, CorrelationData: []byte(rt)})
		if ack == nil || ack.ReasonCode != 0x87 || ack.Properties == nil || !strings.Contains(ack.Properties.ReasonString, "chat/v1/user/1/") {
			t.Fatalf("request answered on %s: PUBACK %+v, want 0x87 naming chat/v1/user/1/", rt, ack)
		}
	}
	const own = "chat/v1/user/1/rpc/not-subscribed"
	if ack, err := asker.publish1("chat/v1/rpc/me.get", []byte(`{}`), &paho.PublishProperties{ResponseTopic: own, CorrelationData: []byte("own")}); err != nil {
		t.Fatalf("request answered on %s: PUBACK %+v %v", own, ack, err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case pk := <-replies:
			if !bytes.Equal(pk.Properties.CorrelationData, []byte("own")) || pk.Topic != own {
				t.Fatalf("the requester got %s on %s (correlation %q): an answer to a refused request", pk.Payload, pk.Topic, pk.Properties.CorrelationData)
			}
			if !bytes.Contains(pk.Payload, []byte(`"status":200`)) {
				t.Fatalf("reply %s", pk.Payload)
			}
			for filter, c := range onlookers {
				noPublish(t, c, time.Second, "a connection subscribed to "+filter+" got an answer to user 1's requests", func([]byte) bool { return true })
			}
			return
		case <-deadline:
			t.Fatalf("no reply on %s, a topic of the requester's own tree it did not subscribe to", own)
		}
	}
}

// A Response Topic is a topic the server keeps (with its request in the
// queue), held to the 256 bytes of every topic and filter: one of 256
// bytes in the requester's tree is answered, one of 257 refused as a
// response topic the requester may not name (PUBACK 0x87, the reason
// naming the tree and the limit) and answered nowhere. 512 bytes were
// allowed.
func TestAnRPCResponseTopicOfMoreThan256BytesIsRefused(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	asker, _, replies := dialPahoReceiving(t, srv.MQTTAddr(), 1, "rpc-long-topic")
	long := "chat/v1/user/1/rpc/" + strings.Repeat("a", 256-len("chat/v1/user/1/rpc/"))
	ack, err := asker.publish1("chat/v1/rpc/me.get", []byte(`{}`), &paho.PublishProperties{ResponseTopic: long + "a", CorrelationData: []byte("257")})
	if ack == nil || ack.ReasonCode != 0x87 || ack.Properties == nil || !strings.Contains(ack.Properties.ReasonString, "chat/v1/user/1/") ||
		!strings.Contains(ack.Properties.ReasonString, "256 bytes") {
		t.Fatalf("a request naming a response topic of 257 bytes: PUBACK %+v %v, want 0x87 naming chat/v1/user/1/ and 256 bytes", ack, err)
	}
	if ack, err := asker.publish1("chat/v1/rpc/me.get", []byte(`{}`), &paho.PublishProperties{ResponseTopic: long, CorrelationData: []byte("256")}); err != nil {
		t.Fatalf("a request naming a response topic of 256 bytes: PUBACK %+v %v", ack, err)
	}
	select {
	case pk := <-replies:
		if string(pk.Properties.CorrelationData) != "256" || pk.Topic != long || !bytes.Contains(pk.Payload, []byte(`"status":200`)) {
			t.Fatalf("got %s on %s (correlation %q), want the answer to the request naming 256 bytes", pk.Payload, pk.Topic, pk.Properties.CorrelationData)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer on a response topic of 256 bytes")
	}
}

// The events topic carries events alone: a client decodes whatever comes
// on it as one. A request naming it as its Response Topic is refused as a
// response topic the requester may not name (PUBACK 0x87, the reason
// naming the events topic) and answered nowhere. The answer was published
// on the events topic, where the requester's event handling took a
// {"status":…} reply for an event of no type.
func TestAnRPCNamingItsEventsTopicAsResponseTopicIsRefused(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	asker, _, replies := dialPahoReceiving(t, srv.MQTTAddr(), 1, "rpc-events-topic")
	events := testnode.EventsTopic(1)
	ack, err := asker.publish1("chat/v1/rpc/me.get", []byte(`{}`), &paho.PublishProperties{ResponseTopic: events, CorrelationData: []byte("events")})
	if ack == nil || ack.ReasonCode != 0x87 || ack.Properties == nil || !strings.Contains(ack.Properties.ReasonString, events) {
		t.Fatalf("a request naming %s as its response topic: PUBACK %+v %v, want 0x87 naming the events topic", events, ack, err)
	}
	if ack, err := asker.publish1("chat/v1/rpc/me.get", []byte(`{}`), &paho.PublishProperties{ResponseTopic: "chat/v1/user/1/rpc", CorrelationData: []byte("rpc")}); err != nil {
		t.Fatalf("a request answered on chat/v1/user/1/rpc: PUBACK %+v %v", ack, err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case pk := <-replies:
			if pk.Topic == events || string(pk.Properties.CorrelationData) == "events" {
				t.Fatalf("got %s on %s (correlation %q): an answer on the events topic", pk.Payload, pk.Topic, pk.Properties.CorrelationData)
			}
			if string(pk.Properties.CorrelationData) == "rpc" {
				return
			}
		case <-deadline:
			t.Fatal("no answer on chat/v1/user/1/rpc")
		}
	}
}
