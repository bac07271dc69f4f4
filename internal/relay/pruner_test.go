package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

func TestPrunerDeletesOnlyRowsOlderThanRetention(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	ev := newEvents(pool)
	if err := ev.insert(ctx, 2*time.Hour, 1, 1, 1, 2, 2); err != nil { // 5 old rows
		t.Fatal(err)
	}
	if err := ev.insert(ctx, 30*time.Minute, 1, 2); err != nil { // 2 within the retention
		t.Fatal(err)
	}
	if err := ev.insert(ctx, 0, 3); err != nil { // 1 new
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p, err := relay.NewPruner(pool, relay.PrunerConfig{BatchSize: 2, Interval: 20 * time.Millisecond, Logger: testLogger(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("pruned %d rows, want the 5 older than 1h", n)
	}
	var left, young int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE created_at > now() - interval '1 hour') FROM outbox`).Scan(&left, &young); err != nil {
		t.Fatal(err)
	}
	if left != 3 || young != 3 {
		t.Fatalf("%d rows left (%d younger than 1h), want the 3 young ones", left, young)
	}
	if got := metric(t, reg, "chat_outbox_pruned_total"); got != 5 {
		t.Fatalf("chat_outbox_pruned_total %v, want 5", got)
	}

	// Run prunes periodically: rows that age past the retention go.
	start(t, p.Run)
	if _, err := pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '61 minutes' WHERE msg_key IN ('1', '2')`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "aged rows pruned by Run", func() bool { return outboxCount(t, pool) == 1 })
	var key string
	if err := pool.QueryRow(ctx, "SELECT msg_key FROM outbox").Scan(&key); err != nil || key != "3" {
		t.Fatalf("row left is conversation %q (err %v), want 3", key, err)
	}
	if got := metric(t, reg, "chat_outbox_pruned_total"); got != 7 {
		t.Fatalf("chat_outbox_pruned_total %v, want 7", got)
	}
}

// A node without Kafka prunes the outbox; one with Kafka relays it. On a
// database that a relay serves (a node with Kafka holds the relay lease),
// a pruner (a node started without CHAT_KAFKA_BROKERS by mistake) deletes
// nothing: the rows it would delete are events not published yet, which
// a Kafka outage longer than the retention leaves in the outbox, and their
// consumers would never get them. Once no relay holds the lease, it prunes
// again.
func TestThePrunerDeletesNothingWhileARelayServesTheOutbox(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	ev := newEvents(pool)
	if err := ev.insert(ctx, 2*time.Hour, 1, 1, 2); err != nil { // 3 rows a relay could not publish for 2 h
		t.Fatal(err)
	}
	// A relay whose Kafka is down: it holds the lease and keeps the rows.
	reg := prometheus.NewRegistry()
	rl := start(t, newRelay(t, pool, testConfig(t, testkit.FreePort(t), reg)).Run)
	testkit.WaitFor(t, 10*time.Second, "the relay to take the lease", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })
	p, err := relay.NewPruner(pool, relay.PrunerConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || outboxCount(t, pool) != 3 {
		t.Fatalf("a pruner beside a relay deleted %d unpublished rows (%d left)", n, outboxCount(t, pool))
	}
	rl.stop(t)
	testkit.WaitFor(t, 10*time.Second, "the outbox pruned once no relay serves it", func() bool {
		n, err := p.Prune(ctx)
		return err == nil && n == 3
	})
}
