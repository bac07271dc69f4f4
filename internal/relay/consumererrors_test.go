package relay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

// kafka-go reports a failed join of the consumer group three times: the
// group logs it, the reader logs what the group returned, and after three
// in a row FetchMessage returns it. chat_kafka_consumer_errors_total counts
// each failure once.
func TestEachFailedJoinOfTheConsumerGroupCountsOneKafkaError(t *testing.T) {
	port := testkit.FreePort(t)
	cluster := startKafka(t, port)
	const failures = 3 // kafka-go's MaxAttempts: FetchMessage returns the third
	var joins atomic.Int32
	cluster.ControlKey(kmsg.JoinGroup.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if joins.Add(1) > failures {
			cluster.DropControl()
			return nil, nil, false
		}
		cluster.KeepControl()
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = 27 // REBALANCE_IN_PROGRESS: kafka-go joins again without a back-off
		return resp, nil, true
	})

	reg := prometheus.NewRegistry()
	var got collector
	cons := pinnedConsumer(t, port, relay.ConsumerConfig{NodeID: "joinfail", CommitInterval: 100 * time.Millisecond,
		Registerer: reg, Handler: got.handle})
	start(t, cons.Run)
	testkit.WaitFor(t, 10*time.Second, "the group joined after the failed joins", func() bool { return joins.Load() > failures })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(addr(port)), Topic: topic, Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond}
	defer w.Close()
	// Until the reader has its partitions, an event written would be
	// before where the new group starts reading: write until one arrives.
	testkit.WaitFor(t, 15*time.Second, "an event handled", func() bool {
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("1"), Value: []byte(`{"type":"typing","conversationId":1}`)}); err != nil {
			t.Fatal(err)
		}
		return len(got.events()) > 0
	})
	if n := metric(t, reg, "chat_kafka_consumer_errors_total", "kind", "kafka"); n != failures {
		t.Fatalf("chat_kafka_consumer_errors_total{kind=kafka} = %v after %d failed joins, want %d", n, failures, failures)
	}
}
