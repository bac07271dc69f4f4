package pgembed

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultConnectTimeout bounds a connection attempt when the URL does not:
// an unreachable database fails fast instead of hanging a publisher.
const defaultConnectTimeout = 5 * time.Second

// IdleInTransactionTimeout is how long PostgreSQL lets a connection of
// chatd's pools sit idle in a transaction before it ends the session
// (idle_in_transaction_session_timeout), unless the database URL says.
const IdleInTransactionTimeout = "10s"

// URLError is a database URL that cannot be used as written: it does not
// parse, or its pool_max_conns contradicts the pool size set apart. Unlike
// a database that does not answer, trying again cannot help.
type URLError struct{ Err error }

func (e *URLError) Error() string { return e.Err.Error() }
func (e *URLError) Unwrap() error { return e.Err }

// OpenPool connects to url with settings suited to chatd. What the URL
// says explicitly wins: its pool_max_conns over maxConns (the caller's
// size; <= 0 takes at least 16), its connect_timeout (or PGCONNECT_TIMEOUT)
// over 5 s; 0, libpq's "no limit", counts as unset. A pool size the
// caller says was set explicitly (WithMaxConnsFrom) and a different
// pool_max_conns in the URL are a conflict, refused.
func OpenPool(ctx context.Context, url string, maxConns int32, opts ...PoolOption) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &URLError{fmt.Errorf("parse database url: %w", err)}
	}
	// pgxpool does not say whether the URL named the pool size, the
	// connection config (which keeps it as a runtime parameter) does.
	cc, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, &URLError{fmt.Errorf("parse database url: %w", err)}
	}
	_, urlSize := cc.RuntimeParams["pool_max_conns"]
	pc := &poolConfig{Config: cfg}
	for _, o := range opts {
		o(pc)
	}
	switch {
	case urlSize && pc.maxConnsFrom != "" && cfg.MaxConns != maxConns:
		return nil, &URLError{fmt.Errorf("the database URL's pool_max_conns=%d and the pool size %d of %s disagree: keep one of them", cfg.MaxConns, maxConns, pc.maxConnsFrom)}
	case urlSize:
	case maxConns > 0:
		cfg.MaxConns = maxConns
	default:
		cfg.MaxConns = max(cfg.MaxConns, 16)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	// pgx prepares every statement, and PostgreSQL switches a prepared
	// statement to a generic plan after five executions, kept for the life
	// of the connection. On a fresh database, before autovacuum first
	// analyzes the tables, that plan is made for empty tables: a sequential
	// scan of message for every clientMsgId check (measured: 124 million
	// rows read in 10 s of load, the send transaction 20x slower). Planning
	// each execution with its real arguments and the tables' current sizes
	// is the robust default; the group-commit pool only calls
	// chat_send_batch, which caches its own statements' plans
	// (migrations/functions.sql).
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	// chatd's statements are lookups by key that take a millisecond; one
	// whose estimate crosses jit_above_cost (an unanalyzed table, a guess
	// about a subquery) was compiled by LLVM first: 52.7 ms of JIT for the
	// 1 ms presence-watchers lookup of a connect burst (EXPLAIN ANALYZE,
	// 10,000 conversations). An operator may still ask for it in the URL
	// (jit=on).
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	// A transaction whose client's connection died with nothing telling
	// PostgreSQL (a network cut, a proxy that restarted) stays open,
	// idle in transaction, until the server's TCP keepalives find the
	// connection dead, two hours by default: meanwhile it holds its row
	// locks, a conversation's row among them, and every send to that
	// conversation waits on it. chatd's transactions wait on nothing but
	// PostgreSQL between their statements (a few milliseconds of Go), so
	// 10 s idle is an orphan, not a slow transaction, and bounds the
	// stall. The one transaction that waits on something else, a round of
	// blob deletions, turns it off for itself (Attachments.DeleteBlobs).
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = IdleInTransactionTimeout
	}
	// Times leave the store in UTC whatever the host's zone, so every
	// createdAt, lastSeen and joinedAt a client sees reads "...Z", as
	// docs/events.md shows and as chat_send_batch writes message.new into
	// the outbox; pgx's default is the host's local zone.
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		if prev != nil {
			return prev(ctx, c)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}

// PoolOption adjusts a pool's configuration.
type PoolOption func(*poolConfig)

type poolConfig struct {
	*pgxpool.Config
	maxConnsFrom string // WithMaxConnsFrom
}

// WithApplicationName names the pool's connections. chatd uses
// "chatd:<node id>": outbox rows record it as their origin.
func WithApplicationName(name string) PoolOption {
	return func(c *poolConfig) { c.ConnConfig.RuntimeParams["application_name"] = name }
}

// WithMaxConnsFrom says the pool size given to OpenPool was set
// explicitly, where names by what ("db_max_conns from env
// CHAT_DB_MAX_CONNS"): a different pool_max_conns in the URL is then
// refused rather than taken.
func WithMaxConnsFrom(where string) PoolOption {
	return func(c *poolConfig) { c.maxConnsFrom = where }
}
