package presence

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/testkit"
)

// blackHole accepts connections and never answers: a Kafka broker that
// hangs (stuck, or behind a network that drops replies).
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func presenceEvent(user int64) chat.Event {
	at := time.Now().UTC()
	return chat.PresenceEvent(chat.Presence{UserID: user, Online: true, LastSeen: &at})
}

// Presence is best effort, and its publisher is called by the tracker's
// flush, which also records connections and pushes presence to this
// node's clients: a Kafka that hangs must neither stop that flush nor
// make the node hold every event it could not send. Publish never waits,
// what does not fit the bounded queue is dropped and counted, and Close
// returns by its deadline.
func TestPresencePublishingNeverWaitsForAHungKafkaAndHoldsABoundedQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewKafkaPublisher([]string{blackHole(t)}, "chat.events", "node-a", nil, reg)
	const n = 3 * publishQueue
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		for i := range n {
			p.Publish(presenceEvent(int64(i)))
		}
		done <- time.Since(start)
	}()
	select {
	case took := <-done:
		t.Logf("%d publishes to a hung Kafka took %v", n, took)
	case <-time.After(5 * time.Second):
		t.Fatalf("%d publishes to a hung Kafka did not return within 5 s", n)
	}
	if q := p.queued(); q > publishQueue {
		t.Fatalf("%d events held for a hung Kafka, want at most %d", q, publishQueue)
	}
	if dropped := testutil.ToFloat64(p.dropped); dropped < n-publishQueue-publishBatch {
		t.Fatalf("%v events counted as dropped of %d published into a queue of %d", dropped, n, publishQueue)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.Close(ctx); err == nil {
		t.Fatal("Close with events still queued for a hung Kafka reported no error")
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("Close took %v past its 2 s deadline", took)
	}
}

// With Kafka up, every event published reaches the topic, in order per
// user, keyed and stamped with the node's origin, and Close flushes what
// is still queued.
func TestPresencePublishedToKafkaArrivesKeyedAndStampedWithItsOrigin(t *testing.T) {
	k := kafkatest.Start(t, kfake.SeedTopics(1, "chat.events"))
	reg := prometheus.NewRegistry()
	p := NewKafkaPublisher(k.ListenAddrs(), "chat.events", "node-a", nil, reg)
	for i := range 50 {
		p.Publish(presenceEvent(int64(i % 5)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	msgs, err := kafkatest.ReadTopic(ctx, k.ListenAddrs()[0], "chat.events", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 50 {
		t.Fatalf("%d presence events in Kafka, want 50", len(msgs))
	}
	for _, m := range msgs {
		if kafkatest.Header(m, "origin") != "node-a" || kafkatest.Header(m, "type") != chat.EventPresence || len(m.Key) == 0 {
			t.Fatalf("message %q headers %v", m.Key, m.Headers)
		}
	}
	if d := testutil.ToFloat64(p.dropped); d != 0 {
		t.Fatalf("%v events dropped with Kafka up", d)
	}
}

// A closed publisher leaves nothing behind: no connection to Kafka and no
// goroutine of kafka-go's (its metadata refresh would otherwise poll the
// brokers for as long as the process lives).
func TestPresencePublisherLeavesNoKafkaConnectionOrGoroutineAfterClose(t *testing.T) {
	k := kafkatest.Start(t, kfake.SeedTopics(1, "chat.events"))
	before := kafkatest.Goroutines()
	p := NewKafkaPublisher(k.ListenAddrs(), "chat.events", "node-a", nil, nil)
	for i := range 5 {
		p.Publish(presenceEvent(int64(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	msgs, err := kafkatest.ReadTopic(ctx, k.ListenAddrs()[0], "chat.events", 1)
	if err != nil || len(msgs) != 5 {
		t.Fatalf("%d presence events in Kafka (%v), want 5", len(msgs), err)
	}
	testkit.WaitFor(t, 5*time.Second, "kafka-go's goroutines gone", func() bool { return kafkatest.Goroutines() <= before })
}
