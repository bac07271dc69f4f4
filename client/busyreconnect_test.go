package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A CONNECT refused because the node's connect budget is full (CONNACK
// 0x9F) is told when to come back (user property retryAfter): the
// client's automatic reconnect waits at least that long before its next
// attempt, however short its own backoff, and then gets in.
func TestTheClientWaitsTheRetryAfterOfABusyConnackBeforeReconnecting(t *testing.T) {
	t.Parallel()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_CONNECT_BUDGET_RATE": "0.5", "CHAT_CONNECT_BUDGET_QUEUE": "0"}), nil)
	// This connect takes the budget's one token: the next is refused and
	// told to come back in 2 s (a turn every 2 s).
	first, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "first", Password: testnode.Token(t, 99), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Drop)

	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 21) // its own backoff is at most 300 ms
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	testkit.WaitFor(t, 5*time.Second, "the first attempt", func() bool { return px.Accepted() >= 1 })
	refused := time.Now()
	testkit.WaitFor(t, 10*time.Second, "a second attempt", func() bool { return px.Accepted() >= 2 })
	if gap := time.Since(refused); gap < 1800*time.Millisecond {
		t.Fatalf("the client came back %v after a CONNACK that said retryAfter=2, want at least 2 s", gap.Round(time.Millisecond))
	}
	if err := c.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("the client did not connect once the budget had a turn for it: %v", err)
	}
}
