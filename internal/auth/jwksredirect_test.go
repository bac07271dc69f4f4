package auth

import (
	"crypto"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/logtest"
)

// redirector is an https server answering every request with a redirect
// to to; its client trusts every httptest TLS server.
func redirector(t *testing.T, to string) *httptest.Server {
	return tlsServer(t, http.RedirectHandler(to, http.StatusFound))
}

func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestJWKSRefusesARedirectFromHTTPSToPlainHTTP: an https key set URL
// that redirects to plain http would have its keys fetched where anyone
// on the path can replace them and sign tokens chatd accepts. The fetch
// fails instead (logged, naming both URLs), and a token signed with a key
// the plain http server publishes is put off like any other token while
// the key set cannot be fetched.
func TestJWKSRefusesARedirectFromHTTPSToPlainHTTP(t *testing.T) {
	plain := newIDP(t)
	key := newECKey(t)
	plain.setKeys(map[string]crypto.Signer{"k": key})
	srv := redirector(t, plain.url())
	logs := &logtest.Buffer{}
	v := New(Options{JWKS: jwksAt(t, srv.URL+"/certs", JWKSOptions{Client: srv.Client()}, logs)})
	putOff(t, v, signKid(t, key, "k", idpClaims("1")))
	if n := plain.fetches.Load(); n != 0 {
		t.Errorf("the plain http key set was fetched %d times after a redirect from https", n)
	}
	if l := logs.String(); !strings.Contains(l, "JWKS fetch failed") || !strings.Contains(l, "redirect from https") || !strings.Contains(l, plain.url()) {
		t.Errorf("log lacks the refused redirect and its target:\n%s", l)
	}
}

// TestJWKSFollowsAnHTTPSRedirectToAnotherHostAndLogsItOnce: a redirect to
// another https host (a CDN) is followed, as before: TLS authenticates
// the host redirected to, and the configured one chose it. It is logged
// once at info, not at every refresh, so that operators see where the keys
// come from.
func TestJWKSFollowsAnHTTPSRedirectToAnotherHostAndLogsItOnce(t *testing.T) {
	key := newECKey(t)
	p := &idp{t: t, keys: map[string]crypto.Signer{"k": key}}
	cdn := tlsServer(t, http.HandlerFunc(p.serve))
	srv := redirector(t, cdn.URL+"/keys.json")
	logs := &logtest.Buffer{}
	v := New(Options{JWKS: jwksAt(t, srv.URL+"/certs", JWKSOptions{Client: srv.Client()}, logs)})
	accepts(t, v, signKid(t, key, "k", idpClaims("1")), 1)
	// An unknown kid fetches the set again, through the same redirect.
	rejects(t, v, signKid(t, key, "other", idpClaims("1")), ErrUnknownKey)
	if n := p.fetches.Load(); n != 2 {
		t.Errorf("the key set at the host redirected to was fetched %d times, want 2", n)
	}
	if n := strings.Count(logs.String(), "JWKS URL redirects to another host"); n != 1 {
		t.Errorf("the redirect to another host logged %d times over two fetches, want once:\n%s", n, logs.String())
	}
	if l := logs.String(); !strings.Contains(l, cdn.URL+"/keys.json") {
		t.Errorf("log lacks where the keys come from:\n%s", l)
	}
}
