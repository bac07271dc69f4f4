// Package pgerr turns PostgreSQL failures into chatd's typed errors, the
// one rule every store on PostgreSQL answers by (store, the push device
// store): typed chat errors pass through; infrastructure failures (the
// database cannot serve now) become chat.Unavailable, which transports
// answer "retry later"; values the database cannot hold (SQLSTATE class
// 22) become invalid; anything else, a constraint broken or a query wrong,
// is a bug, left untyped so transports answer internal. Answering a bug
// "retry later" would have clients repeat a request that fails every time.
package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	chat "github.com/chatd/chatd"
)

// Classify turns err into what callers of op should see (see the package
// comment). nil stays nil.
func Classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *chat.Error
	if errors.As(err, &ce) {
		return err
	}
	if Unavailable(err) {
		return chat.Unavailable(op, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22") {
		// Class 22 (data exception): a value the database cannot hold, e.g.
		// NUL in text or an out-of-range number. The client's fault, not ours.
		return &chat.Error{Code: chat.CodeInvalid, Message: "value rejected by the database", Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Unavailable reports whether err means "the database cannot serve this
// right now" as opposed to "this request is wrong" or "this code is wrong".
func Unavailable(err error) bool {
	if errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.Timeout(err) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return unavailableState(pe.Code)
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// unavailableState lists the SQLSTATEs that mean "retry later".
func unavailableState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"): // connection exception
		return true
	case strings.HasPrefix(code, "53"): // insufficient resources (disk, memory, connections)
		return true
	case strings.HasPrefix(code, "57P0"): // admin/crash shutdown, cannot connect now, database dropped
		return true
	case strings.HasPrefix(code, "40"): // serialization failure, deadlock: the transaction may simply be retried
		return true
	}
	switch code {
	case "25006", // read_only_sql_transaction: database or standby read-only
		"57014", // query_canceled: statement_timeout or a cancel request
		"55P03": // lock_not_available: lock_timeout
		return true
	}
	return false
}

// Conflict reports whether err is a deadlock (40P01) or a serialization
// failure (40001): PostgreSQL rolled the whole transaction back, and the
// same transaction run again may succeed.
func Conflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// conflictAttempts is how many times RetryConflicts runs a transaction.
const conflictAttempts = 3

// conflictPause is the longest pause before the first retry of a
// conflict; each later one may be twice the one before. A pause is drawn
// between a fifth of its longest and all of it (1-5 ms, then 2-10 ms):
// the transactions a deadlock or serialization failure set against each
// other, run again at once, meet again; spread over a few milliseconds,
// one commits before the other starts.
const conflictPause = 5 * time.Millisecond

// RetryConflicts runs tx, one whole transaction, again while it fails as
// a Conflict, up to three times in all, after a short random pause that
// grows (conflictPause), and returns its last error. A ctx done before a
// retry ends the wait at once: the conflict is returned, wrapped with
// ctx's error.
func RetryConflicts(ctx context.Context, tx func() error) error {
	var err error
	for attempt := range conflictAttempts {
		if attempt > 0 {
			if werr := pause(ctx, conflictPause<<(attempt-1)); werr != nil {
				return fmt.Errorf("%w (not run again: %w)", err, werr)
			}
		}
		if err = tx(); err == nil || !Conflict(err) {
			return err
		}
	}
	return err
}

// pause waits between a fifth of longest and longest, or until ctx is
// done (its error).
func pause(ctx context.Context, longest time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	t := time.NewTimer(longest/5 + rand.N(longest-longest/5+1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
