package web

import "testing"

// unopenedSpec gives its user 200 conversations, made at once: it runs
// against a chatd of its own, without the API rate limit.
const unopenedSpec = "unopened.spec.mjs"

// TestBrowserAConversationNeverOpenedCatchesUpAfterTimeOffline runs
// web/e2e/unopened.spec.mjs in headless Chromium: conversations the page
// lists but never opened show their unread counts and, opened, their
// messages after a reconnection: an empty group and a direct conversation
// the other side opened, written to while the page was offline, and a
// group on the inbox's second page written to while the page reads the
// inbox, which stays listed throughout.
func TestBrowserAConversationNeverOpenedCatchesUpAfterTimeOffline(t *testing.T) {
	t.Parallel()
	runOwnBrowserSpec(t, unopenedSpec, "CHAT_LIMIT_API_RATE=0")
}
