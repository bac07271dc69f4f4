package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

const (
	packetSpec = "packet.spec.mjs"
	pubackSpec = "puback.spec.mjs"
	earlySpec  = "early.spec.mjs"
)

// TestWebClientRefusesAPublishOverChatdsPacketLimit runs
// web/e2e/packet.spec.mjs: a send larger than the Maximum Packet Size of
// chatd's CONNACK fails at once without being published, and the session
// stays connected for the sends after it.
func TestWebClientRefusesAPublishOverChatdsPacketLimit(t *testing.T) {
	t.Parallel()
	runSessionSpec(t, packetSpec)
}

// TestWebClientRefusesAnOversizedSendQueuedBeforeTheFirstCONNACK runs
// web/e2e/early.spec.mjs: a send larger than chatd's Maximum Packet Size
// made before the first CONNACK fails as one made while connected, once
// the CONNACK tells the limit, and is never published; the sends queued
// with it go through in order on the one connection.
func TestWebClientRefusesAnOversizedSendQueuedBeforeTheFirstCONNACK(t *testing.T) {
	t.Parallel()
	runSessionSpec(t, earlySpec)
}

// TestWebClientSendResolvesWithTheSeqOfChatdsPUBACK runs
// web/e2e/puback.spec.mjs: a send resolves with the seq (and duplicate)
// of chatd's PUBACK.
func TestWebClientSendResolvesWithTheSeqOfChatdsPUBACK(t *testing.T) {
	t.Parallel()
	runSessionSpec(t, pubackSpec)
}

// runSessionSpec runs an e2e spec of the web client's MQTT session (Node,
// mqtt.js, no browser) against a chatd of its own.
func runSessionSpec(t *testing.T, spec string) {
	if testing.Short() {
		t.Skip("builds and starts chatd")
	}
	node := requireNode(t)
	ensureNodeModules(t)
	base := startChatd(t, buildChatd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", spec), spec+": ", "CHATD_URL="+base); err != nil {
		t.Fatalf("%s failed: %v", spec, err)
	}
}
