package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAStaticTokenAnsweredRetryLaterKeepsConnecting: chatd answers
// CONNACK 0x88 (server unavailable) to an identity provider's token while
// the provider's signing keys cannot be fetched. That is no refusal: a
// client with a static Token must keep reconnecting with backoff (Err
// stays nil, AwaitConnection's error does not match ErrUnauthorized) and
// connect once chatd can check the token again.
func TestAStaticTokenAnsweredRetryLaterKeepsConnecting(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "kc-1", USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	var up atomic.Bool
	var fetches atomic.Int32
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		if !up.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	}))
	t.Cleanup(idp.Close)
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_JWKS_URL": idp.URL + "/certs", "CHAT_JWKS_REFRESH_INTERVAL": "1s", "CHAT_JWT_AUDIENCE": "chatd"}), nil)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "21", "aud": "chatd", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "kc-1"
	idpToken, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}

	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 21)
	cfg.Token = idpToken
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	// Several attempts answered 0x88, and the client still trying.
	testkit.WaitFor(t, 10*time.Second, "three connection attempts", func() bool { return px.Accepted() >= 3 })
	if err := c.Err(); err != nil {
		t.Fatalf("Err() = %v while chatd answers retry later, want nil", err)
	}
	if err := c.AwaitConnection(ctxFor(t, 500*time.Millisecond)); err == nil || errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("AwaitConnection while chatd answers retry later: %v, want a timeout that is no refusal", err)
	}

	up.Store(true)
	if err := c.AwaitConnection(ctxFor(t, 15*time.Second)); err != nil {
		t.Fatalf("the client did not connect once the provider's keys could be fetched: %v (%d fetches)", err, fetches.Load())
	}
	if _, err := c.Inbox(ctxFor(t, 10*time.Second), client.InboxOptions{}); err != nil {
		t.Fatalf("Inbox once connected: %v", err)
	}
}
