package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

const packetSpec = "packet.spec.mjs"

// TestWebClientRefusesAPublishOverChatdsPacketLimit runs
// web/e2e/packet.spec.mjs (Node, mqtt.js, no browser) against a chatd it
// builds and starts: a send larger than the Maximum Packet Size of chatd's
// CONNACK fails at once without being published, and the session stays
// connected for the sends after it.
func TestWebClientRefusesAPublishOverChatdsPacketLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts chatd")
	}
	node := requireNode(t)
	ensureNodeModules(t)
	base := startChatd(t, buildChatd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", packetSpec), "packet e2e: ", "CHATD_URL="+base); err != nil {
		t.Fatalf("%s failed: %v", packetSpec, err)
	}
}
