package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

// partitionsOf answers how many partitions topic has at address (0: it
// does not exist), asked on a transport of its own (one caches what it
// learnt) without allowing auto creation.
func partitionsOf(t *testing.T, address, topic string) int {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	md, err := (&kafka.Client{Addr: kafka.TCP(address), Transport: tr}).Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range md.Topics {
		if tp.Name == topic && tp.Error == nil {
			return len(tp.Partitions)
		}
	}
	return 0
}

// chatd creates chat.push with its partition count as a node starts. A
// push handed off while the topic is missing (Kafka was unreachable
// then, or an operator deleted it) must not have a broker with
// auto.create.topics.enable (Kafka's default) create it with its default
// count, for good: without a way to create it (Config.EnsureKafkaTopic)
// the push is retried until the topic exists.
func TestAPushToAMissingKafkaTopicDoesNotHaveTheBrokerCreateIt(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t, kfake.AllowAutoTopicCreation())
	r := newRig(t)
	r.start(func(c *push.Config) { c.KafkaBrokers, c.KafkaTopic = kc.ListenAddrs(), "chat.push" })
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token"})
	r.send(r.direct(1, 2), 1, "hi")
	// Attempted: the first claim counts an attempt.
	r.waitCount(1, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND attempts > 0`)
	testkit.WaitFor(t, 5*time.Second, "the first attempt to be over", func() bool {
		return r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND (state = 'sent' OR lease_until IS NULL)`) == 1
	})
	if n := partitionsOf(t, kc.ListenAddrs()[0], "chat.push"); n != 0 {
		t.Fatalf("chat.push exists with %d partitions: the push had the broker create it", n)
	}
}

// With Config.EnsureKafkaTopic, the first push to a missing topic creates
// it with the operator's partition count, and goes.
func TestAPushToAMissingKafkaTopicCreatesItAsConfigured(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t, kfake.AllowAutoTopicCreation())
	address := kc.ListenAddrs()[0]
	r := newRig(t)
	r.start(func(c *push.Config) {
		c.KafkaBrokers, c.KafkaTopic = kc.ListenAddrs(), "chat.push"
		c.EnsureKafkaTopic = func(ctx context.Context) error {
			_, err := relay.EnsureTopicIfMissing(ctx, c.KafkaBrokers, "test", "chat.push", 5)
			return err
		}
	})
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token"})
	r.send(r.direct(1, 2), 1, "hi")
	// (Reading a topic asks for its partitions allowing auto creation:
	// not before it exists.)
	testkit.WaitFor(t, 10*time.Second, "chat.push created", func() bool { return partitionsOf(t, address, "chat.push") > 0 })
	if n := partitionsOf(t, address, "chat.push"); n != 5 {
		t.Fatalf("chat.push has %d partitions, want the 5 configured", n)
	}
	testkit.WaitFor(t, 10*time.Second, "the push on chat.push", func() bool {
		recs, err := kafkatest.ReadTopic(context.Background(), address, "chat.push", 5)
		return err == nil && len(recs) == 1
	})
}
