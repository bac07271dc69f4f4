package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	chat "github.com/chatd/chatd"
)

// Store implements chat.Store on PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	limits chat.Limits
}

var _ chat.Store = (*Store)(nil)

// New returns a Store on pool. limits.MaxMembers caps groups; zero fields
// take the chat defaults, the same as chat.NewService does.
func New(pool *pgxpool.Pool, limits chat.Limits) *Store {
	if limits.MaxMembers <= 0 {
		limits.MaxMembers = chat.DefaultMaxMembers
	}
	if limits.MaxBodyBytes <= 0 {
		limits.MaxBodyBytes = chat.DefaultMaxBodyBytes
	}
	return &Store{pool: pool, limits: limits}
}

// PostgreSQL error codes the store reacts to.
const (
	sqlStateUniqueViolation = "23505"
)

// readOnly is what the read paths run in: one snapshot for the membership
// check and the data, and no way to write by mistake.
func readOnly() pgx.TxOptions {
	return pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
}

// inTx runs fn in a READ COMMITTED transaction and commits it. READ
// COMMITTED is deliberate: after waiting for a row lock, the next statement
// sees what the previous lock holder committed, which the send and
// membership paths rely on. Errors come back classified for op.
func (s *Store) inTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	return s.runTx(ctx, op, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

func (s *Store) runTx(ctx context.Context, op string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return classify(op, fmt.Errorf("begin: %w", err))
	}
	// After a successful Commit this is a no-op; on every other path it
	// releases the locks now rather than when the pool notices.
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return classify(op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(op, fmt.Errorf("commit: %w", err))
	}
	return nil
}

// classify turns err into what callers of op should see: typed chat errors
// pass through, infrastructure failures become chat.Unavailable, malformed
// values the database rejected become invalid, and anything else is a bug
// wrapped with op.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *chat.Error
	if errors.As(err, &ce) {
		return err
	}
	if isUnavailable(err) {
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

// isUnavailable reports whether err means "the database cannot serve this
// right now" as opposed to "this request is wrong" or "this code is wrong".
func isUnavailable(err error) bool {
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
	case "57014", // query_canceled: statement_timeout or a cancel request
		"55P03": // lock_not_available: lock_timeout
		return true
	}
	return false
}

// isUniqueViolation reports a unique_violation, optionally on one constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != sqlStateUniqueViolation {
		return false
	}
	return constraint == "" || pe.ConstraintName == constraint
}

// errNoConversation and errNotMember are the two answers every members-only
// operation gives; one wording keeps transports and clients consistent.
func errNoConversation(id int64) error {
	return chat.Errorf(chat.CodeNotFound, "conversation %d does not exist", id)
}

func errNotMember(id int64) error {
	return chat.Errorf(chat.CodeNotMember, "not a member of conversation %d", id)
}
