package relay_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// batchReads counts the relay's reads of an outbox batch.
type batchReads struct{ n atomic.Int64 }

func (b *batchReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM outbox ORDER BY id LIMIT") {
		b.n.Add(1)
	}
	return ctx
}

func (b *batchReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestNotificationsThatArriveDuringABatchCostOneRead: other nodes commit
// outbox rows while the relay writes a batch; their notifications wait in
// the relay's session. One read after the batch covers every row they
// announce: they must not cost a loop and a SELECT each.
func TestNotificationsThatArriveDuringABatchCostOneRead(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if err := store.WantOutboxRows(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// The relay's session is opened with its pool's settings: a pool of
	// its own counts its statements.
	reads := &batchReads{}
	pcfg := pool.Config()
	pcfg.ConnConfig.Tracer = reads
	relayPool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relayPool.Close)
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, kafkaPort(t), reg)
	// No safety poll, no stats: what wakes the relay is what the test does.
	cfg.PollInterval, cfg.StatsInterval, cfg.WriteTimeout = time.Minute, time.Minute, 10*time.Second
	rl := newRelay(t, relayPool, cfg)
	start(t, rl.Run)
	testkit.WaitFor(t, 10*time.Second, "the relay to take the lease", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })

	// A row committed without a notification, which the test holds: the
	// relay publishes it on a Kick, and its DELETE waits.
	ev := newEvents(pool)
	held := heldRow(t, ctx, pool)
	rl.Kick()
	testkit.WaitFor(t, 10*time.Second, "the relay's DELETE to wait for the held row", func() bool { return pgtest.LockWaiters(t, pool) == 1 })

	// Twenty commits of other nodes, each notifying.
	for range 20 {
		ev.mustInsert(t, 2)
	}
	before := reads.n.Load()
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the outbox published", func() bool { return outboxCount(t, pool) == 0 })
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := reads.n.Load() - before; n > 2 {
			t.Fatalf("the relay read the outbox %d times after the batch, for 20 notifications that one read covers", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heldRow commits an outbox row without a notification (as a writer
// that defers it) and returns a transaction that holds the row's lock.
func heldRow(t *testing.T, ctx context.Context, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	var id int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('chat.defer_notify', 'on', true)`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO outbox (msg_key, type, payload)
VALUES ('1', 'conversation.updated', '{"type":"conversation.updated","conversationId":1}') RETURNING id`).Scan(&id)
	})
	if err != nil {
		t.Fatal(err)
	}
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	return hold
}
