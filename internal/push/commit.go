package push

import (
	"context"
	"errors"
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
// twice: inTx does not run it again (pgerr.RetryConflicts runs one again
// only when PostgreSQL aborted it). When pool cannot tell either, the
// failure stands, marked errMayHaveCommitted: its caller must not run
// it again as though nothing committed.
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
	if err == nil || pgerr.Conflict(err) {
		return err
	}
	if xid == "" {
		return fmt.Errorf("%w (%w)", err, errMayHaveCommitted)
	}
	switch cerr := pgerr.Committed(ctx, pool, xid); {
	case cerr == nil:
		return nil
	case errors.Is(cerr, pgerr.ErrNotCommitted):
		return fmt.Errorf("%w (%w)", err, cerr)
	default:
		return fmt.Errorf("%w (whether it committed: %w; %w)", err, cerr, errMayHaveCommitted)
	}
}

// errMayHaveCommitted marks an inTx failure after which the transaction
// may have committed: its COMMIT failed and PostgreSQL could not tell.
// Any other failure of inTx is one of a transaction that did not commit
// (fn failed, or PostgreSQL says so), which may be run again as it was.
var errMayHaveCommitted = errors.New("it may have committed")
