package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/internal/retry"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PrunerConfig configures a Pruner; zero values take the defaults.
type PrunerConfig struct {
	Retention time.Duration // rows older than this are deleted, default 1h
	Interval  time.Duration // between passes, default 1m
	BatchSize int           // rows per DELETE, default 1000
	LockKey   int64         // the relay lease's advisory lock key, default DefaultLockKey

	Logger     *slog.Logger          // default slog.Default(); the pruner adds component, so give it none
	Registerer prometheus.Registerer // nil: metrics are not registered
}

// Pruner keeps the outbox bounded when no relay consumes it (no Kafka
// configured): every Interval it deletes rows older than Retention, in
// batches so no statement holds many row locks for long. Run it instead of
// a Relay: it deletes rows whether or not they were published, so while a
// relay holds the lease on the same database or stands by for it (a node
// with Kafka beside this one without), it deletes nothing and says why. Several nodes may
// run pruners at once; they skip each other's locked rows.
type Pruner struct {
	pool    *pgxpool.Pool
	cfg     PrunerConfig
	log     *slog.Logger
	m       *prunerMetrics
	running atomic.Bool
	beside  atomic.Bool // a relay held the lease at the last pass
}

// NewPruner returns a pruner for the database behind pool.
func NewPruner(pool *pgxpool.Pool, cfg PrunerConfig) (*Pruner, error) {
	if pool == nil {
		return nil, errors.New("outbox pruner: nil pool")
	}
	cfg.Retention = orDefault(cfg.Retention, time.Hour)
	cfg.Interval = orDefault(cfg.Interval, time.Minute)
	cfg.BatchSize = orDefault(cfg.BatchSize, 1000)
	cfg.LockKey = orDefault(cfg.LockKey, DefaultLockKey)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newPrunerMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("outbox pruner: %w", err)
	}
	return &Pruner{pool: pool, cfg: cfg, log: cfg.Logger.With("component", "outbox-pruner"), m: m}, nil
}

// Run prunes once at start and then every Interval until ctx is cancelled;
// it returns nil then. Failures are logged (once per run of failures),
// counted and retried at the next interval. It returns an error only when
// called twice.
func (p *Pruner) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("outbox pruner: Run called twice")
	}
	failing := false
	for {
		n, err := p.Prune(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			p.m.errors.Inc()
			if !failing {
				p.log.Warn("outbox pruner: prune failed, retrying every interval", "err", err)
				failing = true
			}
		default:
			if failing {
				p.log.Info("outbox pruner: pruning again")
				failing = false
			}
			if n > 0 {
				p.log.Debug("outbox pruner: deleted old rows", "rows", n)
			}
		}
		if !retry.Sleep(ctx, p.cfg.Interval) {
			return nil
		}
	}
}

// pruneBatch deletes, among the BatchSize oldest rows by id, those older
// than the retention, and reports how many it deleted and looked at.
// Looking only at the head keeps each statement cheap without an index on
// created_at: ids grow with time, so the old rows are the head.
const pruneBatch = `
WITH head AS (
    SELECT id, created_at FROM outbox ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM outbox o USING head
    WHERE o.id = head.id AND head.created_at < now() - make_interval(secs => $1)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM head)`

// relayPresent is the condition that a relay may read this database's
// outbox: a session holds the relay lease, the session advisory lock
// pg_try_advisory_lock(key) takes (a bigint key is recorded as its high
// and low 32 bits, objsubid 1), or a relay session (application_name
// chatd-relay) is connected, leading or standing by: when a leader goes,
// the lease is free until a relay standing by takes it, within its
// LeaseInterval. key is the SQL parameter of the lease's key.
func relayPresent(key string) string {
	return `(EXISTS (SELECT 1 FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 1
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND classid = ((` + key + `::bigint >> 32) & 4294967295)::oid
        AND objid = (` + key + `::bigint & 4294967295)::oid)
  OR EXISTS (SELECT 1 FROM pg_stat_activity
      WHERE application_name = 'chatd-relay' AND datname = current_database()))`
}

// relayServes: whether a relay may read the outbox (relayPresent), the
// lease's key $1.
var relayServes = `SELECT ` + relayPresent("$1")

// unwantOutbox turns outbox rows off (migrations/functions.sql,
// chat_want_outbox) when no relay said they are wanted for the retention
// $1 (seconds) and none may read them (relayPresent, the lease's key $2):
// all judged in the one statement that deletes the row, so a node with
// Kafka that turns them on meanwhile wins (the row it updated fails
// seen_at on the recheck; the lock it takes to insert one makes this wait
// and see it).
var unwantOutbox = `
DELETE FROM outbox_wanted w
WHERE w.seen_at < now() - make_interval(secs => $1)
  AND NOT ` + relayPresent("$2")

// unwant turns outbox rows off if no relay wants them any more.
func (p *Pruner) unwant(ctx context.Context) error {
	tag, err := p.pool.Exec(ctx, unwantOutbox, p.cfg.Retention.Seconds(), p.cfg.LockKey)
	if err != nil {
		return fmt.Errorf("turn outbox rows off: %w", err)
	}
	if tag.RowsAffected() > 0 {
		p.log.Info("outbox pruner: no relay for the retention; outbox rows are no longer written", "retention", p.cfg.Retention)
	}
	return nil
}

// Prune runs one pass and returns the number of rows deleted. It stops
// after the first batch that holds a row younger than the retention, so an
// old row far behind younger ones (ids and created_at can disagree a little:
// created_at is the inserting transaction's start) waits for a later pass.
// While a relay holds the lease or stands by for it (relayPresent) it
// deletes nothing. Otherwise it first turns outbox rows off when no relay
// has wanted them for the retention (unwantOutbox): rows already written
// are pruned as before.
func (p *Pruner) Prune(ctx context.Context) (int64, error) {
	var relayed bool
	if err := p.pool.QueryRow(ctx, relayServes, p.cfg.LockKey).Scan(&relayed); err != nil {
		return 0, fmt.Errorf("look for a relay: %w", err)
	}
	if was := p.beside.Swap(relayed); relayed != was {
		if relayed {
			p.log.Warn("outbox pruner: a relay publishes this database's outbox to Kafka (a node with CHAT_KAFKA_BROKERS holds its lease or stands by for it); not pruning. Give every node the same Kafka settings")
		} else {
			p.log.Info("outbox pruner: no relay holds the lease or stands by for it any more; pruning")
		}
	}
	if relayed {
		return 0, nil
	}
	if err := p.unwant(ctx); err != nil {
		return 0, err
	}
	var total int64
	for {
		var gone, seen int64
		err := p.pool.QueryRow(ctx, pruneBatch, p.cfg.Retention.Seconds(), p.cfg.BatchSize).Scan(&gone, &seen)
		if err != nil {
			return total, fmt.Errorf("prune outbox: %w", err)
		}
		total += gone
		p.m.pruned.Add(float64(gone))
		if gone < seen || seen < int64(p.cfg.BatchSize) {
			return total, nil
		}
	}
}
