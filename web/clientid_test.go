package web

import "testing"

// clientIDSpec leaves a connection of another user's open under a client
// id of the web client's, so it runs against a chatd of its own.
const clientIDSpec = "clientid.spec.mjs"

// TestBrowserConnectsWithAClientIDOfItsOwnWhenAnotherUserHoldsItsID runs
// web/e2e/clientid.spec.mjs in headless Chromium: a tab whose client id
// another user's connection holds (chatd answers CONNACK 0x85) connects
// with a new one, the user still signed in, and what an earlier page left
// unsent under the refused id is sent once.
func TestBrowserConnectsWithAClientIDOfItsOwnWhenAnotherUserHoldsItsID(t *testing.T) {
	t.Parallel()
	runOwnBrowserSpec(t, clientIDSpec)
}
