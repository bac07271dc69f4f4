package push

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgerr"
)

// xactIDSQL answers the transaction's id (assigned now if it has none
// yet), which inTx asks about when the answer to its COMMIT is lost.
const xactIDSQL = `SELECT pg_current_xact_id()::text`

// xactStatusSQL is what became of transaction $1: committed, aborted,
// in progress.
const xactStatusSQL = `SELECT pg_xact_status($1::text::xid8)`

// beginner is a pool or a connection.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTx runs fn in a transaction begun on db and commits it; fn reads the
// transaction's id (xactIDSQL) into *xid, in a round trip it makes
// anyway. A COMMIT whose answer was lost (the connection died after it
// went out) fails though PostgreSQL may have committed it: pool is then
// asked what became of the transaction (xactStatusSQL), and inTx answers
// nil when it committed. So its caller counts what it did (the metrics
// after commit) and uses what it read exactly when it happened, never
// twice: the transaction is not run again (pgerr.RetryConflicts runs one
// again only when PostgreSQL aborted it). When pool cannot tell either,
// the failure stands, as though nothing committed.
func inTx(ctx context.Context, db beginner, pool *pgxpool.Pool, fn func(tx pgx.Tx, xid *string) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	var xid string
	if err := fn(tx, &xid); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	err = tx.Commit(ctx)
	if err == nil || xid == "" || pgerr.Conflict(err) {
		return err
	}
	if cerr := committed(ctx, pool, xid); cerr != nil {
		return fmt.Errorf("%w (whether it committed: %w)", err, cerr)
	}
	return nil
}

// errNotCommitted: PostgreSQL says the transaction did not commit.
var errNotCommitted = errors.New("not committed")

// committed asks pool whether transaction xid committed: nil when it
// did. A transaction whose COMMIT is still on its way, or being done, by
// a backend whose client is gone is in progress for a moment: it is asked
// again, for at most 5 s (a backend that never got the COMMIT waits for
// its client until the connection times out, and counts as not known).
func committed(ctx context.Context, pool *pgxpool.Pool, xid string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		var status *string
		if err := pool.QueryRow(ctx, xactStatusSQL, xid).Scan(&status); err != nil {
			return err
		}
		switch {
		case status == nil:
			return errors.New("transaction status unknown")
		case *status == "committed":
			return nil
		case *status != "in progress":
			return errNotCommitted
		}
		select {
		case <-ctx.Done():
			return errors.New("still in progress")
		case <-time.After(pause):
		}
	}
}
