package client_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
)

// TestAConnectionLostRightAfterItsSubscriptionDoesNotHoldTheEventsBack:
// a connection's events wait behind a hold until its subscription is
// acknowledged and its catch-up queued. One lost right then queues a
// catch-up for a connection that is gone, and the next connection a hold
// of its own behind it: what was written meanwhile still comes, in
// order and once, and so does what follows.
func TestAConnectionLostRightAfterItsSubscriptionDoesNotHoldTheEventsBack(t *testing.T) {
	t.Parallel()
	srv, _, a, conv := sender(t)
	px := newProxy(t, srv.MQTTAddr())
	b := connect(t, testConfig(t, px.URL(), 2))
	first := sendN(t, a, conv, 1, "before")[0]
	messages(t, b, conv, 1, 10*time.Second)

	var once sync.Once
	var cut atomic.Bool
	b.OnSubscribed(func() { once.Do(func() { px.Cut(); cut.Store(true) }) })
	b.TerminateConnection()
	testkit.WaitFor(t, 15*time.Second, "user 2 to subscribe again and be cut off", func() bool {
		return cut.Load() && !b.Connected()
	})
	missed := sendN(t, a, conv, 2, "while cut off")
	px.Resume()
	if err := b.AwaitConnection(ctxFor(t, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	live := sendN(t, a, conv, 1, "after")[0]
	m := messages(t, b, conv, 3, 15*time.Second)
	if m[0].Seq != missed[0] || m[1].Seq != missed[1] || m[2].Seq != live || live != first+3 {
		t.Fatalf("messages after the cut %d %d %d, want %d %d %d", m[0].Seq, m[1].Seq, m[2].Seq, missed[0], missed[1], live)
	}
	noMoreMessages(t, b, conv, 500*time.Millisecond)
}
