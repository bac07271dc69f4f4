package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// A client whose ClientID another user's session holds is refused for its
// client id (CONNACK 0x85), its token being good: it stops at once with
// ErrClientIDRejected, with a TokenFunc too, since every attempt presents
// the same client id. chatd answered 0x86 "bad user name or password"
// before, and such a client kept asking its TokenFunc for new tokens,
// refused the same way, for ever.
func TestAClientWhoseClientIDIsAnotherUsersStopsWithErrClientIDRejected(t *testing.T) {
	t.Parallel()
	_, broker := nodeOn(t, pgtest.NewDB(t))
	owner := testConfig(t, broker, 1)
	owner.ClientID = "phone-of-1"
	connect(t, owner)

	cfg := testConfig(t, broker, 3)
	cfg.ClientID = "phone-of-1"
	cfg.Token = ""
	cfg.TokenFunc = func(context.Context) (string, error) { return testnode.Token(t, 3), nil }
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	err = c.AwaitConnection(ctxFor(t, 10*time.Second))
	if !errors.Is(err, client.ErrClientIDRejected) {
		t.Fatalf("AwaitConnection with another user's client id: %v, want ErrClientIDRejected", err)
	}
	if errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("AwaitConnection with another user's client id: %v matches ErrUnauthorized, though the token is good", err)
	}
	if err := c.Err(); !errors.Is(err, client.ErrClientIDRejected) {
		t.Fatalf("Err() = %v, want ErrClientIDRejected: the client stops reconnecting", err)
	}
}

// A client stopped for its client id fails what needs a connection with
// ErrClientIDRejected, as one stopped for its token does with
// ErrUnauthorized: a send (kept in SessionDir for a client with an id of
// its own) and a request, neither taken for chatd being briefly
// unreachable (ErrUnavailable, worth asking again) nor for Close.
func TestAClientStoppedForItsClientIDFailsSendsAndRequestsWithErrClientIDRejected(t *testing.T) {
	t.Parallel()
	_, broker := nodeOn(t, pgtest.NewDB(t))
	owner := testConfig(t, broker, 1)
	owner.ClientID = "tablet-of-1"
	connect(t, owner)

	cfg := testConfig(t, broker, 3)
	cfg.ClientID = "tablet-of-1"
	cfg.SessionDir = t.TempDir()
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	if err := c.AwaitConnection(ctxFor(t, 10*time.Second)); !errors.Is(err, client.ErrClientIDRejected) {
		t.Fatalf("AwaitConnection with another user's client id: %v, want ErrClientIDRejected", err)
	}
	if _, err := c.Send(ctxFor(t, 5*time.Second), 7, "with a refused client id"); !errors.Is(err, client.ErrClientIDRejected) || errors.Is(err, client.ErrClosed) {
		t.Fatalf("Send on the stopped client: %v, want ErrClientIDRejected", err)
	}
	if n := len(c.Pending()); n != 1 {
		t.Fatalf("%d pending sends, want the refused client id's one kept for the next client", n)
	}
	_, err = c.Inbox(ctxFor(t, 5*time.Second), client.InboxOptions{})
	if !errors.Is(err, client.ErrClientIDRejected) || errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("Inbox on the stopped client: %v, want ErrClientIDRejected and not ErrUnavailable", err)
	}
}
