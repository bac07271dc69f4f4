package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A subscription holds its filter for the connection's life (a persistent
// session's until it ends), and the filter mochi decodes is a view into the
// whole SUBSCRIBE it came in: a SUBSCRIBE of one allowed filter and a large
// refused one made the subscription hold both, up to the Maximum Packet
// Size (164 KiB) a subscription, 16 of them a connection, where the
// protocol promises filters of at most 256 bytes. Now a subscription holds
// a copy of its filter alone.
func TestASubscriptionHoldsItsFilterNotTheWholeSubscribe(t *testing.T) {
	const conns, padBytes = 8, 60 << 10
	srv := startNode(t, pgtest.NewDB(t), nil)
	clients := make([]*mqtttest.Client, conns)
	for i := range clients {
		user := int64(i + 1)
		c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("subs-%d", i),
			Password: testnode.Token(t, user), Clean: true, ReadBuffer: 4})
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("connect %d: 0x%02x %v", i, ack.ReasonCode, err)
		}
		t.Cleanup(c.Drop)
		clients[i] = c
	}
	base := testkit.LiveHeap()
	for i, c := range clients {
		for n := range 16 {
			// Refused: outside the user's tree, and longer than a filter may be.
			pad1 := "chat/v1/x/" + strings.Repeat("a", padBytes)
			pad2 := "chat/v1/y/" + strings.Repeat("b", padBytes)
			codes, err := c.Subscribe(fmt.Sprintf("chat/v1/user/%d/s%d", i+1, n), pad1, pad2)
			if err != nil || len(codes) != 3 || codes[0] >= 0x80 || codes[1] < 0x80 || codes[2] < 0x80 {
				t.Fatalf("client %d subscribe %d: %v %v", i, n, codes, err)
			}
		}
	}
	grew := testkit.LiveHeap() - base
	t.Logf("%d connections, 16 subscriptions each from a SUBSCRIBE of %d KiB: live heap %+d KiB", conns, 2*padBytes>>10, grew>>10)
	if grew > 4<<20 {
		t.Fatalf("the subscriptions of %d connections hold %d MiB: each holds the SUBSCRIBE it came in", conns, grew>>20)
	}
	for _, c := range clients { // the subscriptions are alive until here
		if c.Closed() {
			t.Fatal("a connection ended")
		}
	}
}
