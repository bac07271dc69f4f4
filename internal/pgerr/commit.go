package pgerr

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// XactIDSQL answers the transaction's id (assigned now if it has none
// yet): read inside a transaction before its COMMIT, it is what
// Committed asks about when the answer to that COMMIT is lost.
const XactIDSQL = `SELECT pg_current_xact_id()::text`

// xactStatusSQL is what became of transaction $1: committed, aborted,
// in progress.
const xactStatusSQL = `SELECT pg_xact_status($1::text::xid8)`

// ErrNotCommitted: PostgreSQL says the transaction did not commit.
var ErrNotCommitted = errors.New("not committed")

// Querier is a pool (or a connection other than the transaction's).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// AnswerLost says whether err, the failure of a COMMIT (or of a
// pipeline that ends with one), may hide a commit: PostgreSQL said
// nothing (an error of its own, a conflict or the FATAL of a terminated
// backend, is its answer: no commit), so the connection may have died
// with the COMMIT on its way or its answer on the way back. pgconn's
// SafeToRetry cannot tell: a read that failed after the COMMIT went out
// surfaces as "conn closed", which it calls safe.
func AnswerLost(err error) bool {
	var pe *pgconn.PgError
	return err != nil && !errors.As(err, &pe)
}

// Committed asks db whether transaction xid committed: nil when it did,
// ErrNotCommitted when it did not, another error when that is not known.
// A transaction whose COMMIT is still on its way, or being done, by a
// backend whose client is gone is in progress for a moment: it is asked
// again, for at most 5 s even when ctx has ended (a backend that never
// got the COMMIT waits for its client until the connection times out,
// and counts as not known).
func Committed(ctx context.Context, db Querier, xid string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		status, err := XactStatus(ctx, db, xid)
		if err != nil {
			return err
		}
		switch status {
		case "":
			return errors.New("transaction status unknown")
		case "committed":
			return nil
		case "aborted":
			return ErrNotCommitted
		}
		select {
		case <-ctx.Done():
			return errors.New("still in progress")
		case <-time.After(pause):
		}
	}
}

// XactStatus asks db, once, what became of transaction xid: "committed",
// "aborted", "in progress", or "" when PostgreSQL no longer knows (an id
// older than its commit log keeps).
func XactStatus(ctx context.Context, db Querier, xid string) (string, error) {
	var status *string
	if err := db.QueryRow(ctx, xactStatusSQL, xid).Scan(&status); err != nil {
		return "", err
	}
	if status == nil {
		return "", nil
	}
	return *status, nil
}
