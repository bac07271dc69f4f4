package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// outboxSpec cuts a proxy's network, so it runs against a chatd of its own.
const outboxSpec = "outbox.spec.mjs"

// TestBrowserASendUnansweredWhenTheTabGoesAwayIsSentWhenItComesBack runs
// web/e2e/outbox.spec.mjs in headless Chromium: a message written offline
// whose tab is closed while it is still "Sending…" is sent, once, when
// the page is opened again in the same browser, and so are an edit and a
// reaction made offline; and signing out deletes
// the unsent messages of every tab of the user from the browser.
func TestBrowserASendUnansweredWhenTheTabGoesAwayIsSentWhenItComesBack(t *testing.T) {
	chromium, node := browserTools(t)
	base := startChatd(t, buildChatd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", outboxSpec), "e2e outbox: ", "CHATD_URL="+base, "CHROMIUM_PATH="+chromium); err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
}
