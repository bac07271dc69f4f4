package server_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
)

// A topic alias holds its topic for the connection's life, and the topic
// mochi decodes is a view into the whole PUBLISH it came in: an alias set
// by a publish with a large payload held that payload too, 16 packets of
// up to the Maximum Packet Size (164 KiB) a connection, 2.5 MiB where the
// protocol promises 16 topics of at most 256 bytes. Now an alias holds a
// copy of its topic alone.
func TestATopicAliasHoldsItsTopicNotTheWholePublishThatSetIt(t *testing.T) {
	const conns, payloadBytes = 8, 150 << 10
	srv := startNode(t, pgtest.NewDB(t), nil)
	clients := make([]*mqtttest.Client, conns)
	for i := range clients {
		clients[i], _ = dialAs(t, srv.MQTTAddr(), int64(i+1), fmt.Sprintf("alias-%d", i), 5, true)
	}
	payload := bytes.Repeat([]byte("x"), payloadBytes)
	before := heapInUse()
	for i, c := range clients {
		for alias := uint16(1); alias <= 16; alias++ {
			// An allowed topic (its alias is recorded) with a payload it
			// refuses: a typing indicator is {} or nothing.
			ack, err := c.Publish(fmt.Sprintf("chat/v1/conv/%d/typing", alias), 1, payload, mqtttest.PublishOpts{TopicAlias: alias})
			if err != nil || ack.ReasonCode != 0x99 {
				t.Fatalf("client %d alias %d: PUBACK 0x%02x, %v; want 0x99", i, alias, ack.ReasonCode, err)
			}
		}
	}
	growth := int64(heapInUse()) - int64(before)
	t.Logf("%d connections, 16 aliases each set by a %d KiB publish: heap in use %+.1f MiB", conns, payloadBytes>>10, float64(growth)/(1<<20))
	if growth > 4<<20 {
		t.Fatalf("the aliases of %d connections hold %.1f MiB: each holds the publish that set it, not its topic", conns, float64(growth)/(1<<20))
	}
	for _, c := range clients { // the aliases are alive until here
		if c.Closed() {
			t.Fatal("a connection ended")
		}
	}
}
