package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// seqScans reads how many sequential scans table has had. Statistics reach
// pg_stat_user_tables when a backend flushes them (idle, or at exit), so
// callers close the connections whose scans they want counted first.
func seqScans(t *testing.T, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	conn, err := pool.Acquire(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(testCtx(t), "SELECT pg_stat_clear_snapshot()"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRow(testCtx(t), "SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE relname = $1", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// flushStats makes every connection of the pools (none may be in use)
// flush the table statistics it holds: a backend sends them only every
// second or so, or as it exits (asynchronously: pool.Reset returns before
// then), so a count read without this may miss what a backend did, and a
// later read add it.
func flushStats(t *testing.T, pools ...*pgxpool.Pool) {
	t.Helper()
	for _, p := range pools {
		for _, c := range p.AcquireAllIdle(testCtx(t)) {
			// The flush is made as the statement's transaction ends,
			// before its answer.
			_, err := c.Exec(testCtx(t), "SELECT pg_stat_force_next_flush()")
			c.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// seqScanCounts is seqScans of each table.
func seqScanCounts(t *testing.T, pool *pgxpool.Pool, tables []string) map[string]int64 {
	t.Helper()
	n := map[string]int64{}
	for _, tbl := range tables {
		n[tbl] = seqScans(t, pool, tbl)
	}
	return n
}

// unanalyzedDB is a fresh database whose tables autovacuum never analyzes,
// so their plans are made from the planner's guesses however they grow.
func unanalyzedDB(t *testing.T, tables ...string) (url string, pool *pgxpool.Pool) {
	t.Helper()
	url = pgtest.NewDB(t)
	pool, err := pgembed.OpenPool(testCtx(t), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, tbl := range tables {
		mustExec(t, testCtx(t), pool, "ALTER TABLE "+tbl+" SET (autovacuum_enabled = off)")
	}
	return url, pool
}

func TestGroupCommitPlansStayOnIndexesAsAnUnanalyzedTableGrows(t *testing.T) {
	url, pool := unanalyzedDB(t, "message", "conversation", "conversation_member", "outbox")
	// The group-commit pool the way the server configures it (cached
	// plans), made as bad as it gets: generic plans from the first
	// execution, built while message is empty.
	// pgtest's URLs are keyword=value strings; an unknown keyword is a
	// run-time parameter of every connection.
	sendPool, err := pgembed.OpenPool(testCtx(t), url+" plan_cache_mode=force_generic_plan", 2)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pool, chat.DefaultLimits(), store.WithSendPool(sendPool), store.WithBatching(64, 1))
	conv := mustGroup(t, st, 1, 2)
	mustSend(t, st, conv.ID, 1, "plans are made now")

	// The table grows far beyond what the cached plans were made for, and
	// nothing analyzes it.
	mustExec(t, testCtx(t), pool, `
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no)
		SELECT $1, s, 2, gen_random_uuid(), 'filler', s FROM generate_series(2, 30001) AS s`, conv.ID)
	mustExec(t, testCtx(t), pool, `UPDATE conversation SET last_seq = 30001, message_count = 30001, last_message_seq = 30001 WHERE id = $1`, conv.ID)
	// So do the conversation and member tables the batch also updates.
	mustExec(t, testCtx(t), pool, `
		WITH c AS (INSERT INTO conversation (type) SELECT 'GROUP' FROM generate_series(1, 5000) RETURNING id)
		INSERT INTO conversation_member (conversation_id, user_id) SELECT c.id, u FROM c, generate_series(10, 15) AS u`)
	flushStats(t, pool, sendPool)
	tables := []string{"message", "conversation", "conversation_member"}
	before := seqScanCounts(t, pool, tables)

	for i := 0; i < 30; i++ {
		if m := mustSend(t, st, conv.ID, 1, "after growth"); m.Seq != int64(30002+i) {
			t.Fatalf("seq %d, want %d", m.Seq, 30002+i)
		}
	}
	if err := st.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	flushStats(t, pool, sendPool)
	for _, tbl := range tables {
		if after := seqScans(t, pool, tbl); after != before[tbl] {
			t.Errorf("%d sequential scans of %s during 30 group-committed sends; the batch statements must look rows up by key", after-before[tbl], tbl)
		}
	}
}

func TestSendIsNotHeldUpByAnotherConversationsLockedRow(t *testing.T) {
	st, pool := newStore(t) // up to four transactions in flight
	var convs []chat.Conversation
	for i := 0; i < 8; i++ {
		convs = append(convs, mustGroup(t, st, 1, 2))
	}
	stuck := convs[0]
	// Something else holds the stuck conversation's row (a long
	// transaction, a slow disk on its pages): its sends must wait...
	release := pgtest.LockConversation(t, testCtx(t), pool, stuck.ID)
	defer release()
	var waiting sync.WaitGroup
	for i := 0; i < 10; i++ {
		waiting.Add(1)
		go func() {
			defer waiting.Done()
			if _, err := st.Send(testCtx(t), sendReq(stuck.ID, 1, "waits")); err != nil {
				t.Errorf("send to the stuck conversation: %v", err)
			}
		}()
	}
	waitFor(t, "sends queued behind the lock", func() bool {
		return queryInt(t, pool, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'") > 0
	})
	// ...and nobody else's.
	var others sync.WaitGroup
	start := time.Now()
	for _, c := range convs[1:] {
		for i := 0; i < 5; i++ {
			others.Add(1)
			go func() {
				defer others.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := st.Send(ctx, sendReq(c.ID, 1, "free")); err != nil {
					t.Errorf("send to conversation %d while %d is locked: %v", c.ID, stuck.ID, err)
				}
			}()
		}
	}
	others.Wait()
	t.Logf("sends to other conversations committed in %v while one conversation was locked", time.Since(start))
	release()
	waiting.Wait()
	if n := queryInt(t, pool, "SELECT last_seq FROM conversation WHERE id = $1", stuck.ID); n != 10 {
		t.Fatalf("stuck conversation last_seq %d after the lock went, want 10", n)
	}
}

func TestGroupCommitWakesTheRelayAfterCommitNotFromInsideIt(t *testing.T) {
	st, pool := newStore(t)
	conv := mustGroup(t, st, 1, 2)
	wait := listenOutbox(t, pool)

	// A transaction that defers the wake-up inserts outbox rows silently.
	if err := pgx.BeginFunc(testCtx(t), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(testCtx(t), "SELECT set_config('chat.defer_notify', 'on', true)"); err != nil {
			return err
		}
		_, err := tx.Exec(testCtx(t), `INSERT INTO outbox (msg_key, type, payload) VALUES ('x', 'test', '{}')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if wait(300 * time.Millisecond) {
		t.Fatal("the outbox trigger notified inside a transaction that deferred it")
	}
	// Group commit defers it and wakes the relay once committed.
	mustSend(t, st, conv.ID, 1, "wake up")
	if !wait(5 * time.Second) {
		t.Fatal("no chat_outbox notification after a group-committed send")
	}
	// Any other writer still notifies through the trigger.
	if _, err := pool.Exec(testCtx(t), `INSERT INTO outbox (msg_key, type, payload) VALUES ('y', 'test', '{}')`); err != nil {
		t.Fatal(err)
	}
	if !wait(5 * time.Second) {
		t.Fatal("no chat_outbox notification for a plain outbox insert")
	}
}

func TestHotWritesSkipTheRelayWakeUpWhenNoRelayElsewhereNeedsIt(t *testing.T) {
	var needed atomic.Bool
	var asked atomic.Int64
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithRelayWake(func() bool { asked.Add(1); return needed.Load() }))
	conv := mustGroup(t, st, 1, 2)
	r := newReceipts(t, st, store.ReceiptsConfig{})
	wait := listenOutbox(t, pool)

	// No relay needs waking: a send, a read and a delivered flush commit
	// their outbox rows without a NOTIFY.
	seq := mustSend(t, st, conv.ID, 1, "quiet").Seq
	if _, err := r.MarkRead(testCtx(t), conv.ID, 2, seq); err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, conv.ID, 2, "quiet too")
	r.Delivered(conv.ID, 1, seq+1)
	waitFor(t, "delivered flush", func() bool { return r.DeliveredFlushes() == 1 })
	for typ, want := range map[string]int{chat.EventMessageNew: 2, chat.EventReadUpdated: 1, chat.EventDeliveryUpdated: 1} {
		if got := len(outboxEvents(t, pool, conv.ID, typ)); got != want {
			t.Fatalf("%d %s outbox rows, want %d", got, typ, want)
		}
	}
	if wait(300 * time.Millisecond) {
		t.Fatal("chat_outbox notified although no relay needed it")
	}
	if asked.Load() == 0 {
		t.Fatal("the hot paths never asked whether a relay needs waking")
	}

	// A relay on another node needs it: group commit notifies again.
	needed.Store(true)
	mustSend(t, st, conv.ID, 1, "wake up")
	if !wait(5 * time.Second) {
		t.Fatal("no chat_outbox notification after a send once a relay needs it")
	}
}

// listenOutbox LISTENs on chat_outbox on a connection of its own and
// returns a wait that reports whether a notification arrived within d.
func listenOutbox(t *testing.T, pool *pgxpool.Pool) (wait func(d time.Duration) bool) {
	t.Helper()
	listener, err := pool.Acquire(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(listener.Release)
	if _, err := listener.Exec(testCtx(t), "LISTEN chat_outbox"); err != nil {
		t.Fatal(err)
	}
	return func(d time.Duration) bool {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := listener.Conn().WaitForNotification(ctx)
		return err == nil
	}
}
