package web

import "testing"

// outboxSpec cuts a proxy's network, so it runs against a chatd of its own.
const outboxSpec = "outbox.spec.mjs"

// TestBrowserASendUnansweredWhenTheTabGoesAwayIsSentWhenItComesBack runs
// web/e2e/outbox.spec.mjs in headless Chromium: a message written offline
// whose tab is closed while it is still "Sending…" is sent, once, when
// the page is opened again in the same browser, and so are an edit and a
// reaction made offline; and signing out deletes
// the unsent messages of every tab of the user from the browser.
func TestBrowserASendUnansweredWhenTheTabGoesAwayIsSentWhenItComesBack(t *testing.T) {
	t.Parallel()
	runOwnBrowserSpec(t, outboxSpec)
}
