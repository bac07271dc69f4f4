package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// mochi decodes a CONNECT's client id and properties as views into the
// whole packet, and the client keeps them for the connection's life: a
// connection held its CONNECT, token included, up to the 64 KiB a CONNECT
// may have, where it needs its client id (at most 256 bytes). Now the
// hook keeps copies of what it and mochi use, so a CONNECT padded to near
// its limit costs a connection no more than a plain one.
func TestAConnectionDoesNotHoldItsConnectPacket(t *testing.T) {
	const conns = 100
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONNECT_USER_RATE": "0"})
	dial := func(prefix string, props packets.Properties) []*mqtttest.Client {
		out := make([]*mqtttest.Client, conns)
		for i := range out {
			user := int64(i + 1)
			c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("%s-%d", prefix, i),
				Password: testnode.Token(t, user), Clean: true, Properties: props, ReadBuffer: 4})
			if err != nil || ack.ReasonCode != 0 {
				t.Fatalf("connect %s-%d: 0x%02x %v", prefix, i, ack.ReasonCode, err)
			}
			t.Cleanup(c.Drop)
			out[i] = c
		}
		return out
	}
	base := uint64(testkit.LiveHeap())
	plain := dial("plain", packets.Properties{})
	afterPlain := uint64(testkit.LiveHeap())
	pad := packets.Properties{User: []packets.UserProperty{{Key: "pad", Val: strings.Repeat("p", 60<<10)}}}
	padded := dial("padded", pad)
	afterPadded := uint64(testkit.LiveHeap())
	perPlain := (int64(afterPlain) - int64(base)) / conns
	perPadded := (int64(afterPadded) - int64(afterPlain)) / conns
	t.Logf("live heap: %d, %d, %d; per connection: %d KiB with a plain CONNECT, %d KiB with a 60 KiB one", base, afterPlain, afterPadded, perPlain>>10, perPadded>>10)
	if perPadded-perPlain > 8<<10 {
		t.Fatalf("a connection whose CONNECT was 60 KiB holds %d KiB more than a plain one: it keeps its CONNECT", (perPadded-perPlain)>>10)
	}
	for _, c := range append(plain, padded...) { // alive until measured
		if c.Closed() {
			t.Fatal("a connection ended")
		}
	}
}
