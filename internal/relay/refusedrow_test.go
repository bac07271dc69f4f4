package relay_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// A row Kafka refuses for what it is, not for the moment (here
// INVALID_TIMESTAMP: a topic's message.timestamp.before.max.ms and an old
// backlog), can never be published: it is dropped, logged and counted
// (kind="refused"), and the rows around it, refused with it while they
// shared its partition's request, are published.
func TestRelayDropsARowKafkaRefusesForGoodAndKeepsGoing(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := testkit.FreePort(t)
	cluster := startKafka(t, port)
	refuseProducesOf(cluster, 32, func(records []byte) bool { // INVALID_TIMESTAMP
		return bytes.Contains(records, []byte("poison"))
	})
	reg := prometheus.NewRegistry()
	rl := newRelay(t, pool, testConfig(t, port, reg))
	ev := newEvents(pool)
	ev.mustInsert(t, 81, 81, 81)
	if _, err := pool.Exec(context.Background(), `INSERT INTO outbox (msg_key, type, payload)
		VALUES ('81', 'message.new', '{"type":"message.new","conversationId":81,"seq":100,"body":"poison"}')`); err != nil {
		t.Fatal(err)
	}
	ev.mustInsert(t, 81, 81, 81)
	start(t, rl.Run)
	testkit.WaitFor(t, 15*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	want, total := ev.counts()
	checkMessages(t, readUntil(t, addr(port), total, 5*time.Second), want)
	if n := metric(t, reg, "chat_relay_errors_total", "kind", "refused"); n != 1 {
		t.Fatalf("refused rows %v, want 1", n)
	}
}
