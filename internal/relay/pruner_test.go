package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
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
	pool, ctx := threeUnpublishedRows(t)
	// A relay whose Kafka is down: it holds the lease and keeps the rows.
	reg := prometheus.NewRegistry()
	rl := start(t, newRelay(t, pool, testConfig(t, testkit.FreePort(t), reg)).Run)
	testkit.WaitFor(t, 10*time.Second, "the relay to take the lease", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })
	p := prunesNothingOfThree(t, ctx, pool, "a relay")
	rl.stop(t)
	testkit.WaitFor(t, 10*time.Second, "the outbox pruned once no relay serves it", func() bool {
		n, err := p.Prune(ctx)
		return err == nil && n == 3
	})
}

// Outbox rows are wanted while a relay may read them. A pruner turns them
// off only when no relay said it wants them for the pruner's retention:
// not while one holds the lease or stands by for it (its session is
// connected), not after a relay refreshed seen_at; then it does, and rows
// already in the outbox are pruned as before.
func TestThePrunerTurnsOutboxRowsOffOnlyAfterItsRetentionWithoutARelay(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	wanted := func() bool {
		t.Helper()
		var on bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox_wanted)`).Scan(&on); err != nil {
			t.Fatal(err)
		}
		return on
	}
	age := func(d time.Duration) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE outbox_wanted SET seen_at = now() - make_interval(secs => $1)`, d.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	prune := func() {
		t.Helper()
		p, err := relay.NewPruner(pool, relay.PrunerConfig{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Prune(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.WantOutboxRows(ctx, pool); err != nil {
		t.Fatal(err)
	}
	ev := newEvents(pool)
	if err := ev.insert(ctx, 2*time.Hour, 1, 2); err != nil {
		t.Fatal(err)
	}

	// Within the retention.
	age(59 * time.Minute)
	prune()
	if !wanted() {
		t.Fatal("outbox rows turned off 59 minutes after a relay wanted them")
	}

	// Past it, but a relay holds the lease, or stands by on a session.
	age(2 * time.Hour)
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, relay.DefaultLockKey); err != nil {
		t.Fatal(err)
	}
	prune()
	if !wanted() {
		t.Fatal("outbox rows turned off while a relay holds the lease")
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock_all(), set_config('application_name', 'chatd-relay', false)`); err != nil {
		t.Fatal(err)
	}
	prune()
	if !wanted() {
		t.Fatal("outbox rows turned off while a relay stands by")
	}
	holder.Hijack().Close(ctx) // its session goes

	// A relay that led a moment ago (its Kafka down) refreshed seen_at.
	reg := prometheus.NewRegistry()
	rl := start(t, newRelay(t, pool, testConfig(t, testkit.FreePort(t), reg)).Run)
	testkit.WaitFor(t, 10*time.Second, "the relay to take the lease", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })
	rl.stop(t)
	prune()
	if !wanted() {
		t.Fatal("outbox rows turned off just after a relay led")
	}

	// An hour on, with no relay anywhere: off, and the old rows pruned. A
	// closed connection's backend leaves pg_stat_activity (and drops its
	// locks) a moment after the client is gone: wait for that first.
	testkit.WaitFor(t, 10*time.Second, "the stopped relays' sessions to end", func() bool {
		return pgtest.QueryOne[bool](t, pool, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = 'chatd-relay' AND datname = current_database())`)
	})
	age(61 * time.Minute)
	prune()
	if wanted() {
		t.Fatal("outbox rows still wanted an hour after the last relay")
	}
	if n := outboxCount(t, pool); n != 0 {
		t.Fatalf("%d old outbox rows left", n)
	}
}

// The lease is free for a moment when its holder goes: its PostgreSQL
// session ends, and a relay standing by (a chatd-relay session, trying
// the lease every LeaseInterval) takes it a moment later and publishes the
// rows a Kafka outage left in the outbox. A pruner pass in between must
// not delete them: it prunes only while no relay session is connected,
// as it turns outbox rows off only then.
func TestThePrunerDeletesNothingWhileARelayStandsByForTheLease(t *testing.T) {
	pool, ctx := threeUnpublishedRows(t)
	// A session of its own, not the pool's: closed at cleanup whatever
	// the test found.
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "chatd-relay"
	standby, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Close(context.Background()) })
	p := prunesNothingOfThree(t, ctx, pool, "a relay standing by")
	if err := standby.Close(ctx); err != nil { // its session goes: nothing reads the outbox any more
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the outbox pruned once no relay session is left", func() bool {
		n, err := p.Prune(ctx)
		return err == nil && n == 3
	})
}

// prunesNothingOfThree makes a pruner and has it prune once, beside what
// beside says may read the outbox: of the outbox's 3 unpublished rows it
// must delete none. It returns the pruner.
// threeUnpublishedRows gives a database whose outbox holds 3 rows a
// relay could not publish for 2 hours (Kafka down), past any retention.
func threeUnpublishedRows(t *testing.T) (*pgxpool.Pool, context.Context) {
	t.Helper()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if err := newEvents(pool).insert(ctx, 2*time.Hour, 1, 1, 2); err != nil {
		t.Fatal(err)
	}
	return pool, ctx
}

func prunesNothingOfThree(t *testing.T, ctx context.Context, pool *pgxpool.Pool, beside string) *relay.Pruner {
	t.Helper()
	p, err := relay.NewPruner(pool, relay.PrunerConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || outboxCount(t, pool) != 3 {
		t.Fatalf("a pruner beside %s deleted %d unpublished rows (%d left)", beside, n, outboxCount(t, pool))
	}
	return p
}

// A leader whose database statement failed lets its session go (which
// releases the lease) and backs off before it tries the lease again. The
// rows a Kafka outage left in the outbox are still the relay's to
// publish: a pruner pass during that backoff must delete none of them,
// so a relay session stays connected throughout.
func TestThePrunerDeletesNothingWhileALeaderBacksOffAfterADatabaseError(t *testing.T) {
	pool, ctx := threeUnpublishedRows(t)
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, testkit.FreePort(t), reg) // Kafka down: the relay keeps the rows
	cfg.BackoffMin, cfg.BackoffMax = 3*time.Second, 3*time.Second
	start(t, newRelay(t, pool, cfg).Run)
	testkit.WaitFor(t, 10*time.Second, "the relay to take the lease", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })
	// The leader's next statement on the outbox fails.
	if _, err := pool.Exec(ctx, `ALTER TABLE outbox RENAME TO outbox_away`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the leader to fail and let its lease go", func() bool { return metric(t, reg, "chat_relay_leader") == 0 })
	if _, err := pool.Exec(ctx, `ALTER TABLE outbox_away RENAME TO outbox`); err != nil {
		t.Fatal(err)
	}
	p, err := relay.NewPruner(pool, relay.PrunerConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Well within the relay's backoff.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		n, err := p.Prune(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("a pruner deleted %d unpublished rows while the relay backed off after a database error", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
