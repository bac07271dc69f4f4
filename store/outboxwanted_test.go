package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// relayLockKey is the relay lease (relay.DefaultLockKey, "chat_rly"),
// which store's tests cannot import.
const relayLockKey int64 = 0x636861745f726c79

func outboxRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return pgtest.QueryOne[int](t, pool, `SELECT count(*) FROM outbox`)
}

func outboxWanted(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	return pgtest.QueryOne[bool](t, pool, `SELECT EXISTS (SELECT 1 FROM outbox_wanted)`)
}

// Without a relay (a database no node with Kafka turned outbox rows on
// for), no write leaves an outbox row: a message, a reply, a forward, an
// edit, a reaction, a recall, system entries (the group's creation, a
// title change), a read receipt through Store and through Receipts, and a
// delivered flush. Every event is still published to this node's
// clients.
func TestWithoutARelayNoWriteLeavesAnOutboxRow(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{}
	st, pool := newStoreWithoutRelay(t, store.WithPublisher(rec))
	if outboxWanted(t, pool) {
		t.Fatal("a fresh database wants outbox rows")
	}
	g := mustGroup(t, st, 1, 2, 3)
	h := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 1, "hello")
	mustReply(t, st, g.ID, 2, "hi", m.Seq)
	if _, err := st.Send(ctx, forwardReq(h.ID, 1, g.ID, m.Seq)); err != nil {
		t.Fatal(err)
	}
	mustChange(t, st, edit(g.ID, 1, m.Seq, "hello!"))
	mustChange(t, st, react(g.ID, 2, m.Seq, "👍", true))
	mustChange(t, st, change(chat.KindRecall, g.ID, 1, m.Seq))
	title := "renamed"
	if _, err := st.UpdateGroup(ctx, g.ID, 1, chat.GroupUpdate{Title: &title}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkRead(ctx, g.ID, 2, 2); err != nil {
		t.Fatal(err)
	}
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	if _, err := r.MarkRead(ctx, g.ID, 3, 2); err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, g.ID, 1, "later")
	r.Delivered(g.ID, 3, 99) // clamped to the last seq
	waitFor(t, "the delivered flush", func() bool {
		for _, ev := range rec.events() {
			if ev.Type == chat.EventDeliveryUpdated {
				return true
			}
		}
		return false
	})

	if n := outboxRows(t, pool); n != 0 {
		t.Fatalf("%d outbox rows without a relay, want none", n)
	}
	seen := map[string]int{}
	for _, ev := range rec.events() {
		seen[ev.Type]++
	}
	for _, typ := range []string{chat.EventMessageNew, chat.EventMessageEdited, chat.EventReactionUpdated, chat.EventMessageRecalled,
		chat.EventSystemNew, chat.EventReadUpdated, chat.EventDeliveryUpdated} {
		if seen[typ] == 0 {
			t.Errorf("no %s event published (published: %v)", typ, seen)
		}
	}
}

// Once a node with Kafka turns outbox rows on, every write after it
// leaves its row again, on the same store.
func TestOutboxRowsTurnedOnAreWrittenByTheNextWrite(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStoreWithoutRelay(t)
	g := mustGroup(t, st, 1, 2)
	mustSend(t, st, g.ID, 1, "before")
	if n := outboxRows(t, pool); n != 0 {
		t.Fatalf("%d outbox rows before, want none", n)
	}
	if err := store.WantOutboxRows(ctx, pool); err != nil {
		t.Fatal(err)
	}
	m := mustSend(t, st, g.ID, 1, "after")
	if _, err := st.MarkRead(ctx, g.ID, 2, m.Seq); err != nil {
		t.Fatal(err)
	}
	news := outboxEvents(t, pool, g.ID, chat.EventMessageNew)
	if len(news) != 1 || news[0].Seq != m.Seq {
		t.Fatalf("message.new rows %+v, want one for seq %d", news, m.Seq)
	}
	if reads := outboxEvents(t, pool, g.ID, chat.EventReadUpdated); len(reads) != 1 {
		t.Fatalf("read.updated rows %+v, want one", reads)
	}
}

// A node with Kafka migrates with WantOutbox: outbox rows are on, turned
// on by the transaction that re-applied the functions (the row and the
// send function have the same xmin), and a later migrate without it
// leaves them on.
func TestMigrateWithKafkaWantsOutboxRowsInItsTransaction(t *testing.T) {
	ctx := testCtx(t)
	pool := freshPool(t)
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if outboxWanted(t, pool) {
		t.Fatal("migrated without Kafka, outbox rows are wanted")
	}
	if _, err := store.Migrate(ctx, pool, store.WantOutbox()); err != nil {
		t.Fatal(err)
	}
	var same bool
	err := pool.QueryRow(ctx, `SELECT (SELECT xmin FROM outbox_wanted) = (SELECT xmin FROM pg_proc WHERE proname = 'chat_send_batch')`).Scan(&same)
	if err != nil || !same {
		t.Fatalf("outbox rows turned on in the functions' transaction: %v %v", same, err)
	}
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if !outboxWanted(t, pool) {
		t.Fatal("a migrate without Kafka turned outbox rows off")
	}
}

// Migration 0041 turns outbox rows on when a relay (of an older chatd)
// holds the lease as it runs, and leaves them off when none does.
func TestMigratingBesideALeadingRelayWantsOutboxRows(t *testing.T) {
	for _, leased := range []bool{false, true} {
		ctx := testCtx(t)
		pool := freshPool(t)
		migrateBefore(t, ctx, pool, 41)
		if leased {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, relayLockKey); err != nil {
				t.Fatal(err)
			}
			// Held by its session until the test ends.
			t.Cleanup(func() {
				_, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
				conn.Release()
			})
		}
		if _, err := store.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
		if got := outboxWanted(t, pool); got != leased {
			t.Fatalf("relay lease held %v: outbox rows wanted %v", leased, got)
		}
	}
}
