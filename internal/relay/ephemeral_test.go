package relay

import (
	"context"
	"net"
	"strconv"
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

func typingEvent(conv, user int64) chat.Event {
	return chat.Event{Type: chat.EventTyping, ConversationID: conv, UserID: user}
}

func newEphemeral(t *testing.T, brokers []string, kind EphemeralKind, reg prometheus.Registerer) *EphemeralPublisher {
	t.Helper()
	p, err := NewEphemeralPublisher(EphemeralConfig{Brokers: brokers, Origin: "node-a", Kind: kind, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Ephemeral events are best effort, and their publisher is called by
// what also serves this node's clients (the presence tracker's flush, a
// client's typing indicator): a Kafka that hangs must neither stop that
// nor make the node hold every event it could not send. Publish never
// waits, what does not fit the bounded queue is dropped and counted, and
// Close returns by its deadline.
func TestEphemeralPublishingNeverWaitsForAHungKafkaAndHoldsABoundedQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newEphemeral(t, []string{blackHole(t)}, EphemeralPresence, reg)
	const n = 3 * ephemeralQueue
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
	if q := p.queued(); q > ephemeralQueue {
		t.Fatalf("%d events held for a hung Kafka, want at most %d", q, ephemeralQueue)
	}
	if dropped := testutil.ToFloat64(p.dropped); dropped < n-ephemeralQueue-ephemeralBatch {
		t.Fatalf("%v events counted as dropped of %d published into a queue of %d", dropped, n, ephemeralQueue)
	}
	if got, err := testutil.GatherAndCount(reg, "chat_presence_kafka_dropped_total"); err != nil || got != 1 {
		t.Fatalf("chat_presence_kafka_dropped_total registered %d times (%v)", got, err)
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

// With Kafka up, every event published reaches the topic, keyed and
// stamped with the node's origin, and Close flushes what is still queued:
// presence by user, typing by conversation as the outbox relay keys the
// conversation's stored events (one partition, one order for both).
func TestEphemeralEventsPublishedToKafkaArriveKeyedAndStampedWithTheirOrigin(t *testing.T) {
	k := kafkatest.Start(t, kfake.SeedTopics(1, "chat.events"))
	reg := prometheus.NewRegistry()
	presence := newEphemeral(t, k.ListenAddrs(), EphemeralPresence, reg)
	typing := newEphemeral(t, k.ListenAddrs(), EphemeralTyping, reg)
	for i := range 50 {
		presence.Publish(presenceEvent(int64(i % 5)))
		typing.Publish(typingEvent(int64(100+i%5), int64(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range []*EphemeralPublisher{presence, typing} {
		if err := p.Close(ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	msgs, err := kafkatest.ReadTopic(ctx, k.ListenAddrs()[0], "chat.events", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 100 {
		t.Fatalf("%d ephemeral events in Kafka, want 100", len(msgs))
	}
	for _, m := range msgs {
		ev, err := DecodeEvent(m)
		if err != nil {
			t.Fatal(err)
		}
		want := "user:" + strconv.FormatInt(ev.UserID, 10)
		if ev.Type == chat.EventTyping {
			want = strconv.FormatInt(ev.ConversationID, 10)
		}
		if kafkatest.Header(m, "origin") != "node-a" || kafkatest.Header(m, "type") != ev.Type || string(m.Key) != want {
			t.Fatalf("message %q (want key %q) headers %v", m.Key, want, m.Headers)
		}
	}
	for _, p := range []*EphemeralPublisher{presence, typing} {
		if d := testutil.ToFloat64(p.dropped); d != 0 {
			t.Fatalf("%v %s events dropped with Kafka up", d, p.kind)
		}
	}
}

// A closed publisher leaves nothing behind: no connection to Kafka and no
// goroutine of kafka-go's (its metadata refresh would otherwise poll the
// brokers for as long as the process lives).
func TestEphemeralPublisherLeavesNoKafkaConnectionOrGoroutineAfterClose(t *testing.T) {
	k := kafkatest.Start(t, kfake.SeedTopics(1, "chat.events"))
	before := kafkatest.Goroutines()
	p := newEphemeral(t, k.ListenAddrs(), EphemeralPresence, nil)
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
