package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestRevokeTokensOfTheGoClientSaysWhetherItSignedTheUserOut: tokens.revoke
// (docs/http.md "Signing out everywhere") had no method in the Go client.
// RevokeTokens signs the user out and returns the instant chatd answered
// before it closed the connection the call came on: the client is signed
// out (Err matches ErrUnauthorized), and a second call says so
// (ErrUnauthorized) instead of claiming to revoke what was issued since.
// A client with TokenFunc gets the answer too, and connects again with a
// token issued after the revocation.
func TestRevokeTokensOfTheGoClientSaysWhetherItSignedTheUserOut(t *testing.T) {
	broker := newBroker(t)
	for u := int64(1); u <= 8; u++ {
		c := connect(t, testConfig(t, broker, u))
		start := time.Now().Truncate(time.Second)
		before, err := c.RevokeTokens(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatalf("user %d: RevokeTokens: %v", u, err)
		}
		if before.IsZero() || before.Before(start) {
			t.Fatalf("user %d: tokens revoked before %v, earlier than the call (%v)", u, before, start)
		}
		testkit.WaitFor(t, 10*time.Second, "the client to be signed out", func() bool {
			return errors.Is(c.Err(), client.ErrUnauthorized)
		})
		if _, err := c.RevokeTokens(ctxFor(t, 5*time.Second)); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("user %d: a second RevokeTokens with the revoked token: %v, want ErrUnauthorized", u, err)
		}
	}

	cfg := testConfig(t, broker, 100)
	cfg.Token = ""
	cfg.TokenFunc = func(context.Context) (string, error) { return auth.Mint([]byte(testnode.Secret), 100, time.Hour) }
	c := connect(t, cfg)
	if before, err := c.RevokeTokens(ctxFor(t, 10*time.Second)); err != nil || before.IsZero() {
		t.Fatalf("TokenFunc client: RevokeTokens: %v %v", before, err)
	}
	if err := c.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TokenFunc client after the revocation: %v", err)
	}
	if _, err := c.Inbox(ctxFor(t, 10*time.Second), client.InboxOptions{}); err != nil {
		t.Fatalf("TokenFunc client's request after the revocation: %v", err)
	}
}
