package relay

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/testkit"
)

// A typing indicator is shown for a few seconds: one that waited longer
// for Kafka (a write stalled behind a leader election or a hung broker)
// would show the other nodes' clients a typist who may have stopped, or
// sent their message, long ago. It is dropped, and counted; those
// published once Kafka answers again go out.
func TestATypingIndicatorThatWaitedForAStalledKafkaIsDroppedNotWrittenLate(t *testing.T) {
	k := kafkatest.Start(t, kfake.SeedTopics(1, "chat.events"))
	stalled, release := make(chan struct{}), make(chan struct{})
	k.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		close(stalled)
		k.SleepControl(func() { <-release })
		k.DropControl()
		return nil, nil, false
	})
	reg := prometheus.NewRegistry()
	p := newEphemeral(t, k.ListenAddrs(), EphemeralTyping, reg)
	p.Publish(typingEvent(100, 1))
	testkit.Receive(t, stalled, 10*time.Second, "the first write never reached Kafka")
	p.Publish(typingEvent(100, 2))
	queuedAt := time.Now()
	testkit.WaitFor(t, 2*typingFresh, "the queued indicator to go stale", func() bool { return time.Since(queuedAt) > typingFresh })
	close(release)
	p.Publish(typingEvent(100, 3))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := kafkatest.ReadTopic(ctx, k.ListenAddrs()[0], "chat.events", 1)
	if err != nil {
		t.Fatal(err)
	}
	var users []int64
	for _, m := range msgs {
		ev, err := DecodeEvent(m)
		if err != nil || ev.Type != chat.EventTyping {
			t.Fatalf("%+v, %v", ev, err)
		}
		users = append(users, ev.UserID)
	}
	if len(users) != 2 || users[0] != 1 || users[1] != 3 {
		t.Fatalf("Kafka holds the indicators of users %v, want 1 (in the stalled write) and 3 (published after), not 2 (queued %v behind the stall)",
			users, typingFresh)
	}
	if d := testutil.ToFloat64(p.dropped); d != 1 {
		t.Fatalf("chat_typing_kafka_dropped_total = %v, want 1", d)
	}
}
