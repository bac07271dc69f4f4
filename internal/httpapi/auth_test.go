package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestUnauthorized: every /v1 route answers 401 "unauthorized" with a
// WWW-Authenticate challenge for a missing, malformed, forged or expired
// token, before looking at the request's input.
func TestUnauthorized(t *testing.T) {
	e := newEnv(t)
	expired := signed(t, e.secret, jwt.RegisteredClaims{
		Subject:   "1",
		IssuedAt:  jwt.NewNumericDate(time.Now().Add(-2 * time.Hour)),
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Hour)),
	})
	forged := signed(t, []byte("some-other-secret-0123456789abcdef"), jwt.RegisteredClaims{
		Subject:   "1",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	})
	headers := []struct {
		name, value, challenge string
	}{
		{"missing", "", `Bearer realm="chatd"`},
		{"wrong scheme", "Basic dXNlcjpwYXNz", `Bearer realm="chatd", error="invalid_token"`},
		{"empty bearer", "Bearer ", `Bearer realm="chatd", error="invalid_token"`},
		{"garbage", "Bearer not.a.jwt", `Bearer realm="chatd", error="invalid_token"`},
		{"forged", "Bearer " + forged, `Bearer realm="chatd", error="invalid_token"`},
		{"expired", "Bearer " + expired, `Bearer realm="chatd", error="invalid_token"`},
	}
	for _, rt := range authRoutes() {
		for _, h := range headers {
			r := e.do(0, rt.method, rt.path, rt.body, withHeader("Authorization", h.value))
			if r.status != 401 || r.errorCode() != "unauthorized" {
				t.Errorf("%s %s, %s token: %d %s", rt.method, rt.path, h.name, r.status, r.body)
			}
			if got := r.header.Get("WWW-Authenticate"); got != h.challenge {
				t.Errorf("%s %s, %s token: WWW-Authenticate %q, want %q", rt.method, rt.path, h.name, got, h.challenge)
			}
		}
	}
	// A valid token for the same user passes, so the 401s above are the
	// tokens' doing.
	if r := e.do(1, "GET", "/v1/inbox", nil); r.status != 200 {
		t.Fatalf("valid token: %d %s", r.status, r.body)
	}
	// Lower-case scheme is accepted (RFC 7235: schemes are case-insensitive).
	if r := e.do(0, "GET", "/v1/inbox", nil, withHeader("Authorization", "bearer "+e.token(1))); r.status != 200 {
		t.Errorf("lower-case scheme: %d %s", r.status, r.body)
	}
}

// authRoutes is one request per authenticated route, with bad input, to show
// that authentication comes first.
func authRoutes() []struct {
	method, path string
	body         any
} {
	var out []struct {
		method, path string
		body         any
	}
	for _, rt := range routesUnderV1() {
		path := rt.Path
		for _, w := range []string{"{id}", "{peerId}", "{userId}", "{seq}"} {
			path = strings.ReplaceAll(path, w, "x")
		}
		var body any
		if rt.Method == "POST" {
			body = `{"bogus":` + strconv.Itoa(1) + `}`
		}
		out = append(out, struct {
			method, path string
			body         any
		}{rt.Method, path, body})
	}
	return out
}

func signed(t *testing.T, secret []byte, c jwt.RegisteredClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestATokenRevocationWithABodyIsRefusedAndRevokesNothing: POST
// /v1/me/tokens/revoke takes no body, and like every such POST it refuses
// one with fields (400) or of another media type (415) instead of
// ignoring it: a request the client did not mean as written must not sign
// its user out everywhere. With no body or {} it revokes.
func TestATokenRevocationWithABodyIsRefusedAndRevokesNothing(t *testing.T) {
	e := newEnv(t)
	auth := withHeader("Authorization", "Bearer "+e.token(owner))
	if r := e.do(0, "POST", "/v1/me/tokens/revoke", `{"userId":2}`, auth); r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
		t.Errorf("revoke with a field: %d %s, want 400 invalid", r.status, r.body)
	}
	if r := e.do(0, "POST", "/v1/me/tokens/revoke", `{}`, auth, withHeader("Content-Type", "text/plain")); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("revoke with a text/plain body: %d %s, want 415", r.status, r.body)
	}
	if r := e.do(0, "GET", "/v1/me", nil, auth); r.status != http.StatusOK {
		t.Fatalf("the token after refused revocations: %d %s, want 200: it was revoked", r.status, r.body)
	}
	if r := e.do(0, "POST", "/v1/me/tokens/revoke", `{}`, auth); r.status != http.StatusOK {
		t.Fatalf("revoke with {}: %d %s, want 200", r.status, r.body)
	}
	if r := e.do(0, "GET", "/v1/me", nil, auth); r.status != http.StatusUnauthorized {
		t.Errorf("the token after a revocation: %d %s, want 401", r.status, r.body)
	}
}
