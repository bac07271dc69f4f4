package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// chatd retains nothing, and ignores the retain flag of a PUBLISH rather
// than refusing it (docs/protocol.md): on both versions a retained send is
// stored and delivered as any send, its delivery without the flag, and
// retained publishes to topics of the sender's own tree (refused) leave
// nothing either. mochi's retained store holds its own $SYS values only,
// and a later subscriber to the whole tree gets no retained message.
func TestARetainedPublishIsHandledAsAnyOtherAndNothingIsRetained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv := mustDirect(t, ctx, srv, 1, 2)
	recipient := rawClient(t, srv.MQTTAddr(), 2, "retain-recipient", 5, true)
	for _, v := range []byte{5, 4} {
		c := rawClient(t, srv.MQTTAddr(), 1, fmt.Sprint("retain-v", v), v, true)
		body := fmt.Sprint("retained by v", v)
		ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), body), mqtttest.PublishOpts{Retain: true})
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("v%d: a send with the retain flag: PUBACK 0x%02x %v, want 0x00", v, ack.ReasonCode, err)
		}
		pk := nextPublish(t, recipient, "the message.new of "+body, 10*time.Second, func(pk packets.Packet) bool {
			return strings.Contains(string(pk.Payload), body)
		})
		if pk.FixedHeader.Retain {
			t.Errorf("v%d: the send was delivered with the retain flag", v)
		}
		for _, topic := range []string{testnode.EventsTopic(1), "chat/v1/user/1/x"} {
			if _, err := c.Publish(topic, 1, []byte(`{"type":"message.new","body":"kept?"}`), mqtttest.PublishOpts{Retain: true}); err != nil {
				t.Fatalf("v%d: a retained publish to %s: %v", v, topic, err)
			}
		}
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
		t.Errorf("the two retained sends stored %d messages, want 2", n)
	}
	for topic := range srv.Broker.Server.Topics.Retained.GetAll() {
		if !strings.HasPrefix(topic, "$SYS/") {
			t.Errorf("mochi retained a message on %s", topic)
		}
	}
	later := rawClient(t, srv.MQTTAddr(), 1, "retain-later", 5, true)
	if codes, err := later.Subscribe("chat/v1/user/1/#"); err != nil || codes[0] != 0x01 {
		t.Fatalf("subscribe chat/v1/user/1/#: % x %v", codes, err)
	}
	deadline := time.After(time.Second)
	for {
		select {
		case pk := <-later.Publishes:
			if pk.FixedHeader.Retain {
				t.Fatalf("a later subscriber got a retained message on %s: %s", pk.TopicName, pk.Payload)
			}
		case <-deadline:
			return
		}
	}
}
