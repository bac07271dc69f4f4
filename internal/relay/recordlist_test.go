package relay_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// A broker refuses a produce request whose record batch is over its log
// segment size (segment.bytes) with RECORD_LIST_TOO_LARGE, every time it
// is sent again: a batch of a conversation's rows refused so is written
// in smaller batches, and only a row refused so on its own is dropped (as
// oversize); the rows around it, in the same partition's batch, are all
// published, once each.
func TestRelayWritesSmallerBatchesOnARecordListTooLargeAndDropsOnlyTheRowRefusedAlone(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := testkit.FreePort(t)
	cluster := startKafka(t, port)
	const segment = 4096
	refuseProducesOf(cluster, 18, func(records []byte) bool { return len(records) > segment }) // RECORD_LIST_TOO_LARGE
	reg := prometheus.NewRegistry()
	rl := newRelay(t, pool, testConfig(t, port, reg)) // MaxBatchBytes 1 MiB, 50 rows a batch
	ev := newEvents(pool)
	ev.mustInsert(t, slices.Repeat([]int64{71}, 30)...) // some 300 bytes each
	big := `{"type":"message.new","conversationId":71,"seq":1000,"body":"` + strings.Repeat("x", 2*segment) + `"}`
	if _, err := pool.Exec(context.Background(), "INSERT INTO outbox (msg_key, type, payload) VALUES ('71', $1::jsonb->>'type', $1::jsonb)", big); err != nil {
		t.Fatal(err)
	}
	ev.mustInsert(t, slices.Repeat([]int64{71}, 30)...)
	start(t, rl.Run)
	testkit.WaitFor(t, 15*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	want, total := ev.counts()
	if d := checkMessages(t, readUntil(t, addr(port), total, 5*time.Second), want); d.duplicates != 0 {
		t.Fatalf("%d duplicates", d.duplicates)
	}
	if n := metric(t, reg, "chat_relay_errors_total", "kind", "oversize"); n != 1 {
		t.Fatalf("oversize rows %v, want 1", n)
	}
	if n := metric(t, reg, "chat_relay_published_total"); int(n) != total {
		t.Fatalf("published_total %v, want %d (the dropped row is not published)", n, total)
	}
}
