package store_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// TestTwoFlushesOfCursorsOfLeftConversationsDoNotDeadlock: two cursor
// flushes of one session touch the rows of two conversations its user
// left (only existing rows are moved). Each statement must lock the rows
// in key order whatever its plan meets them in. The database is steered
// to a plan PostgreSQL may pick (a hash join, scanning session_cursor in
// heap order, which the planner costs lower as the tables grow); the first flush's snapshot has row 1
// before row 2 in the heap and the second's row 2 first (an update moved
// row 1 between the two snapshots, both taken while the flushes waited
// for the session), and a test trigger holds each flush after the first
// row it updates until both are held or waiting. Locked in the scan's
// order, flush A held row 1 and flush B row 2, each then waiting for the
// other: a deadlock, one failing. Then, as a guard on whatever plan,
// flushes in opposite orders run concurrently many times.
func TestTwoFlushesOfCursorsOfLeftConversationsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	setup := pgtest.NewPool(t)
	// A plan PostgreSQL may pick: a hash join, whose scan of
	// session_cursor meets the rows in heap order.
	mustExec(t, ctx, setup, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET enable_nestloop = off', current_database());
		EXECUTE format('ALTER DATABASE %I SET enable_mergejoin = off', current_database());
	END $$`)
	pool, err := pgxpool.New(ctx, setup.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ss := store.NewSessions(pool)
	if _, err := ss.Open(ctx, "phone", "", 1, true, false, time.Hour); err != nil {
		t.Fatalf("open: %v", err)
	}
	// User 1 left conversations 1 and 2; their cursor rows still owe
	// what the leave left (inserted in this order: row 1 first in the heap).
	mustExec(t, ctx, pool, `
		INSERT INTO conversation (id, type) VALUES (1, 'GROUP'), (2, 'GROUP');
		INSERT INTO session_cursor (client_id, conversation_id, delivered_seq, end_seq) VALUES ('phone', 1, 0, 50);
		INSERT INTO session_cursor (client_id, conversation_id, delivered_seq, end_seq) VALUES ('phone', 2, 0, 50)`)
	mustExec(t, ctx, pool, `CREATE FUNCTION test_pause_first_row() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF coalesce(current_setting('test.skip', true), '') = 'y' OR coalesce(current_setting('test.paused', true), '') = 'y' THEN
				RETURN NEW;
			END IF;
			PERFORM set_config('test.paused', 'y', true);
			PERFORM pg_advisory_xact_lock_shared(434343);
			RETURN NEW;
		END $$`)
	mustExec(t, ctx, pool, `CREATE TRIGGER test_pause_first_row BEFORE UPDATE ON session_cursor
		FOR EACH ROW EXECUTE FUNCTION test_pause_first_row()`)
	var pause pgx.Tx
	waits := func() int64 { return pgtest.LockWaiters(t, setup) }
	flush := func(seq int64, convs ...int64) error {
		cs := make([]chat.Cursor, len(convs))
		for i, c := range convs {
			cs[i] = chat.Cursor{ClientID: "phone", ConversationID: c, Seq: seq}
		}
		return ss.SaveCursors(ctx, cs)
	}

	pause, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pause.Rollback(context.Background()) }()
	if _, err := pause.Exec(ctx, `SELECT pg_advisory_xact_lock(434343)`); err != nil {
		t.Fatal(err)
	}
	session, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = session.Rollback(context.Background()) }()
	var sessionXID int64
	if err := session.QueryRow(ctx, `SELECT txid_current() % 4294967296 FROM chat_session WHERE client_id = 'phone' FOR UPDATE`).Scan(&sessionXID); err != nil {
		t.Fatal(err)
	}
	a := make(chan error, 1)
	go func() { a <- flush(7, 1, 2) }()
	waitFor(t, "flush A to wait for the session", func() bool { return waits() == 1 })
	// Row 1 moves after row 2 in the heap (a new version), committed
	// before flush B's snapshot and after flush A's.
	move, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := move.Exec(ctx, `SET LOCAL test.skip = 'y'`); err != nil {
		t.Fatal(err)
	}
	if _, err := move.Exec(ctx, `UPDATE session_cursor SET delivered_seq = 1 WHERE client_id = 'phone' AND conversation_id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := move.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b := make(chan error, 1)
	go func() { b <- flush(8, 2, 1) }()
	waitFor(t, "flush B to wait for the session", func() bool { return waits() == 2 })
	if err := session.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Paused in the trigger after a row, or waiting for a row the other
	// holds: no longer for the session.
	waitFor(t, "both flushes to wait (paused after a row, or for a row)", func() bool {
		return queryInt(t, setup, `SELECT count(*) FROM pg_locks l
			WHERE NOT l.granted AND l.pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())
			  AND (l.locktype = 'advisory' OR (l.locktype = 'transactionid' AND l.transactionid::text <> $1::bigint::text))`, sessionXID) == 2
	})
	if err := pause.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"A": a, "B": b} {
		if err := <-ch; err != nil {
			t.Errorf("flush %s: %v", name, err)
		}
	}
	if n := queryInt(t, setup, `SELECT min(delivered_seq) FROM session_cursor WHERE client_id = 'phone'`); n != 8 {
		t.Errorf("cursors at %d, want 8", n)
	}

	mustExec(t, ctx, pool, `DROP TRIGGER test_pause_first_row ON session_cursor`)
	mustExec(t, ctx, pool, `
		INSERT INTO conversation (id, type) SELECT g, 'GROUP' FROM generate_series(3, 8) g;
		INSERT INTO session_cursor (client_id, conversation_id, delivered_seq, end_seq) SELECT 'phone', g, 0, 5000 FROM generate_series(3, 8) g`)
	up, down := []int64{1, 2, 3, 4, 5, 6, 7, 8}, []int64{8, 7, 6, 5, 4, 3, 2, 1}
	for i := int64(0); i < 50; i++ {
		errs := concurrently(2, func(j int) error {
			if j == 0 {
				return flush(10+i, up...)
			}
			return flush(10+i, down...)
		})
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}
