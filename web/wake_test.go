package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// wakeSpec silences a proxy's connections, so it runs against a chatd of its own.
const wakeSpec = "wake.spec.mjs"

// TestBrowserReconnectsAtOnceWhenTheNetworkComesBack runs
// web/e2e/wake.spec.mjs in headless Chromium: when the browser's network
// comes back, the client does not wait for its keep-alive to notice that
// the connection from before is dead, and a message sent meanwhile shows
// within seconds.
func TestBrowserReconnectsAtOnceWhenTheNetworkComesBack(t *testing.T) {
	chromium, node := browserTools(t)
	base := startChatd(t, buildChatd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", wakeSpec), "e2e wake: ", "CHATD_URL="+base, "CHROMIUM_PATH="+chromium); err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
}
