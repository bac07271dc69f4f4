package web

import "testing"

// wakeSpec silences a proxy's connections, so it runs against a chatd of its own.
const wakeSpec = "wake.spec.mjs"

// TestBrowserReconnectsAtOnceWhenTheNetworkComesBack runs
// web/e2e/wake.spec.mjs in headless Chromium: when the browser's network
// comes back, the client does not wait for its keep-alive to notice that
// the connection from before is dead, and a message sent meanwhile shows
// within seconds.
func TestBrowserReconnectsAtOnceWhenTheNetworkComesBack(t *testing.T) {
	t.Parallel()
	runOwnBrowserSpec(t, wakeSpec)
}
