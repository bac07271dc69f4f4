package web

import (
	"net/http"
	"testing"
)

// A page of another site that opened the client (window.open) keeps no
// handle on it: with one it could later send the signed-in tab to a
// look-alike "sign in again" page of its own, under the user's eyes.
func TestThePageSeversItsCrossOriginOpener(t *testing.T) {
	mux := newMux(t, false)
	for _, p := range []string{"/", "/index.html", "/app.js", "/sw.js"} {
		rec := do(mux, http.MethodGet, p, "", "")
		if got := rec.Header().Get("Cross-Origin-Opener-Policy"); got != "same-origin" {
			t.Errorf("GET %s: Cross-Origin-Opener-Policy %q, want same-origin", p, got)
		}
	}
}
