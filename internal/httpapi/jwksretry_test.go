package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/testkit"
)

// TestATokenPutOffUntilTheKeySetMayBeFetchedAgainIsToldWhenThatIs: a
// provider token naming a key chatd has not cached, within MinRefetch of
// the key set's last fetch, is put off (503) because the set cannot be
// fetched again before then. Its Retry-After must say when it can be, not
// 1 s: a client that trusts it would otherwise retry, and be put off, every
// second until then (and give the token up when its retries run out).
func TestATokenPutOffUntilTheKeySetMayBeFetchedAgainIsToldWhenThatIs(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp := testkit.JWKSServer(t, key, "published")
	const minRefetch = 30 * time.Second
	j, err := auth.NewJWKS(auth.JWKSOptions{URL: idp, Refresh: time.Hour, MinRefetch: minRefetch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	e := newEnvWith(t, envConfig{verifier: auth.New(auth.Options{JWKS: j})})
	sign := func(kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "1", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The first unknown kid fetches the set again: not there, refused.
	if r := e.do(0, "GET", "/v1/me", nil, withHeader("Authorization", "Bearer "+sign("made-up"))); r.status != http.StatusUnauthorized {
		t.Fatalf("an unknown kid fetched for: %d %s, want 401", r.status, r.body)
	}
	// The next, at once: put off until the set may be fetched again.
	r := e.do(0, "GET", "/v1/me", nil, withHeader("Authorization", "Bearer "+sign("rotated-in")))
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("an unknown kid within MinRefetch of the last fetch: %d %s, want 503", r.status, r.body)
	}
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || time.Duration(retry)*time.Second < minRefetch-2*time.Second || time.Duration(retry)*time.Second > minRefetch+time.Second {
		t.Errorf("Retry-After %q, want about %v: when the key set may be fetched again", r.header.Get("Retry-After"), minRefetch)
	}
	var body struct {
		Error struct {
			RetryAfter int `json:"retryAfter"`
		} `json:"error"`
	}
	r.decode(t, &body)
	if body.Error.RetryAfter != retry {
		t.Errorf("error.retryAfter %d, Retry-After %d: they differ", body.Error.RetryAfter, retry)
	}
}
