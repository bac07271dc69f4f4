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

// A cursor flush (SaveCursors) locks the sessions it writes cursors of
// before any cursor row, as every other writer of both does (open, drop,
// expire: the session row, then its cursors). Taken the other way round, a
// flush holding a cursor row while its foreign key check waited for the
// session would deadlock with a reopen, drop or expiry of that session
// holding the session while it deleted the cursors; PostgreSQL breaks that
// after deadlock_timeout by failing one of them.
//
// Each test opens the window deterministically: the session "phone" has
// cursors of conversations 1 and 2; a blocker holds cursor (phone, 2); a
// flush of 1, 2 and 3 (3 new, so its foreign key is checked) locks cursor
// 1 and waits there; the operation then runs (and waits, unless it
// finishes at once), and only then is the blocker released.

// cursorFlushRace sets up the session and the flush stopped at (phone, 2),
// runs op, releases the blocker, and wants both the flush and op to
// succeed.
func cursorFlushRace(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ss *store.Sessions, what string, op func() error) {
	t.Helper()
	save := func(seq int64, convs ...int64) error {
		cs := make([]chat.Cursor, len(convs))
		for i, c := range convs {
			cs[i] = chat.Cursor{ClientID: "phone", ConversationID: c, Seq: seq}
		}
		return ss.SaveCursors(ctx, cs)
	}
	if err := save(5, 1, 2); err != nil {
		t.Fatalf("first flush: %v", err)
	}
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blocker.Rollback(context.Background()) })
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM session_cursor WHERE client_id = 'phone' AND conversation_id = 2 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- save(7, 1, 2, 3) }()
	waitLockWaiters(t, pool, 1, "the flush to wait for cursor 2")
	done := make(chan error, 1)
	go func() { done <- op() }()
	var opErr error
	opDone := false
	waitFor(t, what+" to finish or wait for a lock", func() bool {
		select {
		case opErr = <-done:
			opDone = true
			return true
		default:
		}
		return pgtest.LockWaiters(t, pool) >= 2
	})
	_ = blocker.Rollback(ctx)
	deadline := time.After(30 * time.Second)
	select {
	case err := <-flushed:
		if err != nil {
			t.Errorf("cursor flush: %v", err)
		}
	case <-deadline:
		t.Fatal("the cursor flush did not finish")
	}
	if !opDone {
		select {
		case opErr = <-done:
		case <-deadline:
			t.Fatalf("%s did not finish", what)
		}
	}
	if opErr != nil {
		t.Fatalf("%s: %v", what, opErr)
	}
}

// openPhone opens user 1's session "phone"; user 1 is a member of
// conversations 1, 2 and 3 (joined after the open: no stored cursors).
func openPhone(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ss *store.Sessions) {
	t.Helper()
	if _, err := ss.Open(ctx, "phone", "", 1, true, false, time.Hour); err != nil {
		t.Fatalf("open: %v", err)
	}
	mustExec(t, ctx, pool, `
		INSERT INTO conversation (id, type) VALUES (1, 'GROUP'), (2, 'GROUP'), (3, 'GROUP');
		INSERT INTO conversation_member (conversation_id, user_id, role) VALUES (1, 1, 'member'), (2, 1, 'member'), (3, 1, 'member')`)
}

// A clean reopen, a drop or an expiry of the session while a flush of its
// cursors waits between two cursor rows: neither deadlocks, and the
// session's cursors (or the session) are gone afterwards.
func TestChangingASessionDuringACursorFlushDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what   string
		before string // run first, if any
		op     func(ctx context.Context, ss *store.Sessions) error
		after  func(ctx context.Context, ss *store.Sessions) error // run after both, if any
		gone   string                                              // what must be empty at the end
	}{
		// The reopen started the session anew: its cursors are at the
		// conversations' last_seq (0), none at the flushed 7.
		{what: "clean reopen", op: func(ctx context.Context, ss *store.Sessions) error {
			_, err := ss.Open(ctx, "phone", "", 1, true, true, time.Hour)
			return err
		}, gone: `SELECT count(*) FROM session_cursor WHERE client_id = 'phone' AND delivered_seq <> 0`},
		{what: "drop", op: func(ctx context.Context, ss *store.Sessions) error { return ss.Drop(ctx, "phone", "") },
			gone: `SELECT count(*) FROM session_cursor WHERE client_id = 'phone'`},
		// Skipped while being written, or expired: either way it goes
		// at the next pass.
		{what: "expiry", before: `UPDATE chat_session SET last_seen_at = now() - interval '2 hours'`,
			op: func(ctx context.Context, ss *store.Sessions) error {
				_, err := ss.Expire(ctx, []string{})
				return err
			},
			after: func(ctx context.Context, ss *store.Sessions) error {
				_, err := ss.Expire(ctx, []string{})
				return err
			},
			gone: `SELECT count(*) FROM chat_session WHERE client_id = 'phone'`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			pool := pgtest.NewPool(t)
			ss := store.NewSessions(pool)
			openPhone(t, ctx, pool, ss)
			if tc.before != "" {
				mustExec(t, ctx, pool, tc.before)
			}
			cursorFlushRace(t, ctx, pool, ss, tc.what, func() error { return tc.op(ctx, ss) })
			if tc.after != nil {
				if err := tc.after(ctx, ss); err != nil {
					t.Fatalf("%s after the flush: %v", tc.what, err)
				}
			}
			if n := queryInt(t, pool, tc.gone); n != 0 {
				t.Fatalf("after the %s: %s = %d, want 0", tc.what, tc.gone, n)
			}
		})
	}
}

func TestSavedCursorsOfSessionsThatNoLongerExistAreSkipped(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	openPhone(t, ctx, pool, ss)
	if err := ss.SaveCursors(ctx, []chat.Cursor{
		{ClientID: "phone", ConversationID: 1, Seq: 4},
		{ClientID: "gone", ConversationID: 1, Seq: 9},
		{ClientID: "phone", ConversationID: 1, Seq: 3},
	}); err != nil {
		t.Fatalf("save cursors: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM session_cursor WHERE client_id = 'gone'`); n != 0 {
		t.Fatalf("%d cursors of a session that does not exist", n)
	}
	if n := queryInt(t, pool, `SELECT delivered_seq FROM session_cursor WHERE client_id = 'phone' AND conversation_id = 1`); n != 4 {
		t.Fatalf("cursor %d, want the highest acknowledged, 4", n)
	}
}
