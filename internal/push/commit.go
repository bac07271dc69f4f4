package push

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgerr"
)

// xactIDSQL is read by inTx's transactions (pgerr.Committed asks about
// it when the answer to a COMMIT is lost).
const xactIDSQL = pgerr.XactIDSQL

// beginner is a pool or a connection.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTx runs fn in a transaction begun on db and commits it; fn reads the
// transaction's id (xactIDSQL) into *xid, in a round trip it makes
// anyway. A COMMIT whose answer was lost (the connection died after it
// went out) fails though PostgreSQL may have committed it: pool is then
// asked what became of the transaction (pgerr.Committed), and inTx answers
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
	if cerr := pgerr.Committed(ctx, pool, xid); cerr != nil {
		return fmt.Errorf("%w (whether it committed: %w)", err, cerr)
	}
	return nil
}
