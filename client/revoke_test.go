package client_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/pgtest"
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
	t.Parallel()
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

// tokenFuncConfig is user's config minting a new token for every
// connection, as an app signed in with a refresh token does.
func tokenFuncConfig(t *testing.T, broker string, user int64) client.Config {
	cfg := testConfig(t, broker, user)
	cfg.Token = ""
	cfg.TokenFunc = func(context.Context) (string, error) { return auth.Mint([]byte(testnode.Secret), user, time.Hour) }
	return cfg
}

// TestRevokeTokensWhoseAnswerWasLostSaysTheRevocationHappened: with
// TokenFunc, a tokens.revoke whose answer was lost with its connection
// ended as ErrUnavailable, though chatd had signed the user out: the next
// connection, with a token issued since, could not tell. RevokeTokens
// reads the revocation instant before the call and again on the next
// connection now, and returns it: a later instant is the revocation.
func TestRevokeTokensWhoseAnswerWasLostSaysTheRevocationHappened(t *testing.T) {
	t.Parallel()
	broker := newBroker(t)
	c := connect(t, tokenFuncConfig(t, broker, 100))
	var lost atomic.Bool
	c.DropReplies(func(p []byte) bool {
		if !bytes.Contains(p, []byte(`"revokedBefore"`)) || !lost.CompareAndSwap(false, true) {
			return false
		}
		go c.TerminateConnection() // not on paho's reader, which calls this
		return true
	})
	ctx := ctxFor(t, 15*time.Second)
	start := time.Now().Truncate(time.Second)
	before, err := c.RevokeTokens(ctx)
	if !lost.Load() {
		t.Fatal("the answer was not lost")
	}
	if err != nil || before.Before(start) {
		t.Fatalf("RevokeTokens whose answer was lost: %v, %v", before, err)
	}
	me, err := c.Me(ctx)
	if err != nil || me.TokensRevokedBefore == nil || !me.TokensRevokedBefore.Equal(before) {
		t.Fatalf("the revocation instant is %v (%v), RevokeTokens said %v", me.TokensRevokedBefore, err, before)
	}
}

// TestRevokeTokensWhoseRequestWasLostRevokesOnTheNextConnection: a
// tokens.revoke lost on the way to chatd with its connection ended as
// ErrUnavailable, the user still signed in everywhere. The next
// connection tells that nothing happened (a static Token is still
// accepted; with TokenFunc the revocation instant did not move), and
// RevokeTokens asks again there now.
func TestRevokeTokensWhoseRequestWasLostRevokesOnTheNextConnection(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	for _, tc := range []struct {
		name    string
		tokenFn bool
		user    int64
	}{{"static Token", false, 1}, {"TokenFunc", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			px := newProxy(t, srv.MQTTAddr())
			cfg := testConfig(t, px.URL(), tc.user)
			if tc.tokenFn {
				cfg = tokenFuncConfig(t, px.URL(), tc.user)
			}
			c := connect(t, cfg)
			if tc.tokenFn {
				// The revocation instant read first comes back: the
				// request after it is lost.
				var armed atomic.Bool
				armed.Store(true)
				c.DropReplies(func(p []byte) bool {
					if bytes.Contains(p, []byte(`"settings"`)) && armed.CompareAndSwap(true, false) {
						px.StallUp()
					}
					return false
				})
			} else {
				px.StallUp()
			}
			ctx := ctxFor(t, 15*time.Second)
			start := time.Now().Truncate(time.Second)
			type answer struct {
				at  time.Time
				err error
			}
			res := make(chan answer, 1)
			go func() {
				at, err := c.RevokeTokens(ctx)
				res <- answer{at, err}
			}()
			testkit.WaitFor(t, 10*time.Second, "the request to be lost", func() bool { return px.Dropped() >= 20 })
			px.Kill()
			r := <-res
			if r.err != nil || r.at.Before(start) {
				t.Fatalf("RevokeTokens whose request was lost: %v, %v", r.at, r.err)
			}
			if !tc.tokenFn {
				testkit.WaitFor(t, 10*time.Second, "the client to be signed out", func() bool {
					return errors.Is(c.Err(), client.ErrUnauthorized)
				})
			}
		})
	}
}

// TestRevokeTokensAnsweredBeforeTheDisconnectReturnsTheInstant: chatd
// answers tokens.revoke and then closes the connection; a caller that
// got to its wait only after both arrived (a loaded machine) picked the
// closed connection half the time, and RevokeTokens, finding the static
// Token refused, returned the zero instant with a nil error as if the
// answer had been lost. The hook holds each call's wait until its
// connection has ended; the reply that came before is the answer.
func TestRevokeTokensAnsweredBeforeTheDisconnectReturnsTheInstant(t *testing.T) {
	broker := newBroker(t)
	client.SetReplyWaitHook(func(method string, connDone <-chan struct{}) {
		if method == chat.RPCRevokeTokens {
			<-connDone
		}
	})
	t.Cleanup(func() { client.SetReplyWaitHook(nil) })
	for u := int64(1); u <= 16; u++ {
		c := connect(t, testConfig(t, broker, u))
		start := time.Now().Truncate(time.Second)
		before, err := c.RevokeTokens(ctxFor(t, 10*time.Second))
		if err != nil || before.Before(start) {
			t.Fatalf("user %d: RevokeTokens answered before the disconnect: %v, %v (want an instant from %v)", u, before, err, start)
		}
	}
}
