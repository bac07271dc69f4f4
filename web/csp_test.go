package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// directive is the sources of the directive name in policy.
func directive(policy, name string) []string {
	for _, d := range strings.Split(policy, ";") {
		if f := strings.Fields(d); len(f) > 0 && f[0] == name {
			return f[1:]
		}
	}
	return nil
}

// TestThePagesPolicyLetsItConnectToNoWebSocketHostButItsOwn: a script
// injected into the page must not be able to carry what it reads to a
// WebSocket host of its choosing. connect-src names the page's own origin
// ('self', which covers its ws: and wss:) and the object store's origin
// the operator's attachments live at, no scheme alone.
func TestThePagesPolicyLetsItConnectToNoWebSocketHostButItsOwn(t *testing.T) {
	store := "https://files.s3.dualstack.eu-west-1.amazonaws.com"
	for _, tc := range []struct {
		connect, want []string
	}{
		{nil, []string{"'self'"}},
		{[]string{store}, []string{"'self'", store}},
	} {
		mux := http.NewServeMux()
		Register(mux, Options{ConnectSrc: tc.connect, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		csp := do(mux, http.MethodGet, "/", "", "").Header().Get("Content-Security-Policy")
		if got := directive(csp, "connect-src"); !slices.Equal(got, tc.want) {
			t.Errorf("object store %q: connect-src %q, want %q (policy %q)", tc.connect, got, tc.want, csp)
		}
	}
}

// TestThePageDeniesItselfThePowerfulFeaturesItNeverUses: a script
// injected into the page must not be able to ask the user, under chatd's
// name, for the camera, the microphone or where they are. The page uses
// none of them (files are picked or pasted, not captured), so
// Permissions-Policy turns them off for it and for anything it frames.
func TestThePageDeniesItselfThePowerfulFeaturesItNeverUses(t *testing.T) {
	mux := newMux(t, true)
	for _, rec := range []*httptest.ResponseRecorder{do(mux, http.MethodGet, "/", "", ""), do(mux, http.MethodGet, "/app.js", "", ""),
		do(mux, http.MethodPost, "/dev/token", "application/json", `{"userId":1}`)} {
		got := map[string]bool{}
		for _, f := range strings.Split(rec.Header().Get("Permissions-Policy"), ",") {
			if name, allow, ok := strings.Cut(strings.TrimSpace(f), "="); ok && allow == "()" {
				got[name] = true
			}
		}
		for _, f := range []string{"camera", "microphone", "geolocation", "display-capture", "payment", "usb", "serial", "hid", "midi"} {
			if !got[f] {
				t.Errorf("Permissions-Policy %q does not turn %s off", rec.Header().Get("Permissions-Policy"), f)
			}
		}
	}
}
