package relay_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

// Typing and presence are live notifications, never replayed
// (protocol.md): a node restarted with its NodeID resumes its consumer
// group where it stopped, and the indicators and presence changes written
// while it was down, before any of its clients connected, are not handed
// on; those written once it runs are.
func TestARestartedConsumerDoesNotHandOnTypingOrPresenceWrittenWhileItWasDown(t *testing.T) {
	port := kafkaPort(t)
	ephemeral := func(kind relay.EphemeralKind) *relay.EphemeralPublisher {
		p, err := relay.NewEphemeralPublisher(relay.EphemeralConfig{Brokers: []string{addr(port)}, Origin: "chatd:other", Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	typing, presence := ephemeral(relay.EphemeralTyping), ephemeral(relay.EphemeralPresence)
	typingOf := func(user int64) chat.Event {
		return chat.Event{Type: chat.EventTyping, ConversationID: 6, UserID: user}
	}
	presenceOf := func(online bool) chat.Event {
		at := time.Now().UTC()
		return chat.PresenceEvent(chat.Presence{UserID: 3, Online: online, LastSeen: &at})
	}
	cfg := relay.ConsumerConfig{NodeID: "n1", CommitInterval: 20 * time.Millisecond}

	var first collector
	cfg.Handler = first.handle
	run := start(t, pinnedConsumer(t, port, cfg).Run)
	typing.Publish(typingOf(1))
	testkit.WaitFor(t, 20*time.Second, "the first run handles an indicator", func() bool { return len(first.events()) == 1 })
	run.stop(t)

	// Written while the node is down: in Kafka past its group's offsets.
	typing.Publish(typingOf(2))
	presence.Publish(presenceOf(true))
	readUntil(t, addr(port), 3, 10*time.Second)
	// Kafka's timestamps are milliseconds: the consumer made next, in a
	// later one, hands on what was written in its own.
	written := time.Now().UnixMilli()
	testkit.WaitFor(t, time.Second, "a millisecond after the writes", func() bool { return time.Now().UnixMilli() > written })

	var second collector
	cfg.Handler = second.handle
	start(t, pinnedConsumer(t, port, cfg).Run)
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range second.events() {
				t.Logf("the restarted consumer handed on %s of user %d", e.Type, e.UserID)
			}
		}
	})
	// Live ones, on the same keys (so partitions) behind the stale ones.
	typing.Publish(typingOf(4))
	presence.Publish(presenceOf(false))
	testkit.WaitFor(t, 20*time.Second, "the live indicator and presence change handled", func() bool {
		var live int
		for _, e := range second.events() {
			if e.UserID == 4 || e.Type == chat.EventPresence && !*e.Online {
				live++
			}
		}
		return live == 2
	})
	for _, e := range second.events() {
		if e.UserID == 2 || e.Type == chat.EventPresence && *e.Online {
			t.Fatalf("the restarted consumer handed on %s of user %d, written while it was down", e.Type, e.UserID)
		}
	}
}
