package store_test

import (
	"errors"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// Opening a new persistent session forgets the user's offline sessions
// beyond the most recently seen (store.MaxOfflineSessions), and locks
// only those: the ones it keeps stay free for whoever else takes them
// meanwhile, a leave of the user among them (oweUntilLeave takes each of
// the user's sessions FOR KEY SHARE under the group's lock, its sends
// waiting behind it). Locked with FOR UPDATE ... OFFSET, PostgreSQL locks
// the rows the offset skips as well: every new persistent connect locked
// the user's 100 most recent sessions until it committed.
func TestOpeningANewPersistentSessionLocksNoneOfTheSessionsItKeeps(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO chat_session (client_id, user_id, persistent, expiry_seconds, subscriptions, last_seen_at)
		SELECT 'old-' || i, 1, true, 3600, '[]'::jsonb, now() - make_interval(mins => i) FROM generate_series(1, 3) AS i`); err != nil {
		t.Fatal(err)
	}
	hold := beginHold(t, ctx, pool)
	holdExec(t, ctx, hold, `SELECT * FROM chat_session_open('new', 1, true, true, 3600, 'n/p/1')`)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT client_id FROM chat_session WHERE user_id = 1 AND client_id <> 'new' ORDER BY client_id FOR KEY SHARE NOWAIT`)
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		t.Fatalf("a new persistent session's open holds the sessions it keeps locked until it commits: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM chat_session WHERE user_id = 1`); n != 4 {
		t.Fatalf("user 1 has %d sessions after a new one beside 3 offline, want 4", n)
	}
}
