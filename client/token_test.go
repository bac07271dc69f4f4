package client_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// expiringToken is a token for user that chatd accepts for about another
// second: its exp lies in the past by a little less than the verifier's
// leeway.
func expiringToken(t *testing.T, user int64) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(user, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(-auth.Leeway + 2*time.Second)),
	}).SignedString([]byte(testnode.Secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAnExpiredStaticTokenStopsReconnectingAndSaysWhy: chatd ends the
// connection of a static Token when it expires and refuses it from then
// on. The client must stop reconnecting with it (it could never be
// accepted again), say so (Err, an error event, requests and sends fail
// with ErrUnauthorized) and keep the unsent message for the next client.
func TestAnExpiredStaticTokenStopsReconnectingAndSaysWhy(t *testing.T) {
	t.Parallel()
	srv, _ := nodeOn(t, pgtest.NewDB(t))
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 1)
	cfg.Token = expiringToken(t, 1)
	cfg.SessionDir = t.TempDir()
	c := connect(t, cfg)

	ev := nextEvent(t, c, client.EventError, 15*time.Second)
	if ev.Code != "unauthorized" {
		t.Fatalf("error event code %q, want unauthorized", ev.Code)
	}
	if err := c.Err(); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("Err() = %v, want ErrUnauthorized", err)
	}
	attempts := px.Accepted()
	if _, err := c.Send(ctxFor(t, 5*time.Second), 7, "after expiry"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("Send after the refusal: %v, want ErrUnauthorized", err)
	}
	if n := len(c.Pending()); n != 1 {
		t.Fatalf("%d pending sends, want the refused token's one kept for the next client", n)
	}
	if _, err := c.Inbox(ctxFor(t, 5*time.Second), client.InboxOptions{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("Inbox after the refusal: %v, want ErrUnauthorized", err)
	}
	// With reconnect delays of at most 300ms, a client still trying
	// would have come back several times within this second.
	deadline := time.Now().Add(time.Second)
	testkit.WaitFor(t, 2*time.Second, "a second to pass", func() bool {
		if n := px.Accepted(); n != attempts {
			t.Fatalf("the client connected %d more times with a token chatd refused", n-attempts)
		}
		return time.Now().After(deadline)
	})
}

// TestAwaitConnectionSaysATokenFuncsTokensAreRefused: a client with
// TokenFunc keeps trying when chatd refuses a token (the next one may be
// good), but AwaitConnection said only that its context ended, the
// refusal buried in the text: a caller could not tell a bad token (a
// wrong secret) from an unreachable chatd without waiting out its
// context. Its error matches ErrUnauthorized now, and the client still
// connects once the tokens are good.
func TestAwaitConnectionSaysATokenFuncsTokensAreRefused(t *testing.T) {
	t.Parallel()
	_, broker := nodeOn(t, pgtest.NewDB(t))
	var good atomic.Bool
	cfg := testConfig(t, broker, 1)
	cfg.Token = ""
	cfg.TokenFunc = func(context.Context) (string, error) {
		if good.Load() {
			return testnode.Token(t, 1), nil
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "1",
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}).SignedString([]byte("not chatd's secret"))
	}
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	if err := c.AwaitConnection(ctxFor(t, time.Second)); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("AwaitConnection while every token is refused: %v, want ErrUnauthorized", err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil: with TokenFunc the client keeps trying", err)
	}
	good.Store(true)
	if err := c.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("AwaitConnection once the tokens are good: %v", err)
	}
}

// TestAReadReceiptOutlivesATokenFuncsRefusedToken: a client with
// TokenFunc keeps trying when chatd refuses a token, so a read receipt
// that could not be published meanwhile (no connection) is kept for the
// next connection, as after any lost connection. The wait for one ended
// with the last attempt's refusal wrapped in its error, and the receipt
// was taken for one chatd had refused and dropped, Flush saying nothing.
func TestAReadReceiptOutlivesATokenFuncsRefusedToken(t *testing.T) {
	t.Parallel()
	_, broker := nodeOn(t, pgtest.NewDB(t))
	var good atomic.Bool
	good.Store(true)
	cfg := testConfig(t, broker, 1)
	cfg.Token = ""
	cfg.ReadDebounce = time.Hour // published by Flush and by the reconnection only
	cfg.TokenFunc = func(context.Context) (string, error) {
		if good.Load() {
			return testnode.Token(t, 1), nil
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "1",
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}).SignedString([]byte("not chatd's secret"))
	}
	c := connect(t, cfg)
	b := connect(t, testConfig(t, broker, 2))
	conv := direct(t, b, 1)
	seq := sendN(t, b, conv, 1, "read me")[0]

	good.Store(false)
	c.TerminateConnection()
	testkit.WaitFor(t, 10*time.Second, "a refused token to be the last attempt", func() bool {
		return errors.Is(c.AwaitConnection(ctxFor(t, 200*time.Millisecond)), client.ErrUnauthorized)
	})
	if err := c.MarkRead(context.Background(), conv, seq); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctxFor(t, 500*time.Millisecond)); err == nil {
		t.Fatal("Flush without a connection returned nil: the receipt was neither published nor kept")
	}
	good.Store(true)
	if err := c.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the receipt to be published on the next connection", func() bool {
		page, err := c.Inbox(ctxFor(t, 5*time.Second), client.InboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Conversations {
			if e.ID == conv {
				return e.LastReadSeq == seq
			}
		}
		return false
	})
}
