package relay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

// chatd creates chat.events with its partition count (relay.EnsureTopic);
// a topic the broker creates because a client asked for its metadata gets
// the broker's default count, for good. A running consumer whose topic an
// operator deleted must not have the broker create it again (a broker
// with auto.create.topics.enable, the default).
func TestAConsumerDoesNotHaveADeletedTopicCreatedAgain(t *testing.T) {
	if raceEnabled {
		// kafka-go's Reader reads its cancel func as a generation ends
		// (reader.go:112) while the next generation's start writes it
		// (reader.go:1190), unsynchronised: a group whose topic is gone
		// turns generations over fast enough for the detector to see it.
		t.Skip("kafka-go's Reader races with itself across generations")
	}
	port := testkit.FreePort(t)
	startKafka(t, port, kfake.AllowAutoTopicCreation())
	var handled atomic.Int32
	cons := pinnedConsumer(t, port, relay.ConsumerConfig{NodeID: "deleted", CommitInterval: 50 * time.Millisecond,
		Handler: func(chat.Event) { handled.Add(1) }})
	start(t, cons.Run)
	w := &kafka.Writer{Addr: kafka.TCP(addr(port)), Topic: topic, BatchTimeout: time.Millisecond}
	t.Cleanup(func() { _ = w.Close() })
	ctx := context.Background()
	testkit.WaitFor(t, 20*time.Second, "the consumer to handle an event", func() bool {
		if handled.Load() > 0 {
			return true
		}
		_ = w.WriteMessages(ctx, kafka.Message{Key: []byte("1"), Value: []byte(`{"type":"conversation.updated","conversationId":1}`)})
		return false
	})

	if err := w.Close(); err != nil { // its metadata refreshes stop
		t.Fatal(err)
	}
	conn, err := kafka.Dial("tcp", addr(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.DeleteTopics(topic); err != nil {
		t.Fatal(err)
	}
	exists := func() bool {
		// A transport of its own each time: one caches what it learnt.
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		client := &kafka.Client{Addr: kafka.TCP(addr(port)), Transport: tr}
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range md.Topics {
			if tp.Name == topic && tp.Error == nil && len(tp.Partitions) > 0 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); {
		if exists() {
			t.Fatal("the deleted topic exists again: the consumer had the broker create it")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
