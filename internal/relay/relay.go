package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/retry"
	"github.com/chatd/chatd/internal/tracing"
)

const (
	// DefaultTopic is the Kafka topic events are published to.
	DefaultTopic = "chat.events"
	// NotifyChannel is the PostgreSQL channel the outbox trigger notifies
	// (migrations/0003_outbox_notify.sql).
	NotifyChannel = "chat_outbox"
	// DefaultLockKey is the session advisory lock that is the relay lease.
	DefaultLockKey int64 = 0x636861745f726c79 // "chat_rly"
)

// Config configures a Relay. Brokers is required; zero values take the
// documented defaults.
type Config struct {
	Brokers []string // Kafka bootstrap addresses, host:port
	Topic   string   // default DefaultTopic
	NodeID  string   // for logs and the Kafka client id
	// Partitions, when above 0, is how many partitions the relay creates
	// the topic with (EnsureTopic) if it does not exist at its first
	// write, which then waits for that; 0: the write has the broker
	// create it, with the broker's default count.
	Partitions int

	BatchSize     int           // rows per Kafka write, default 500
	MaxBatchBytes int           // bytes per Kafka write, default 1 MiB; larger single rows are dropped
	PollInterval  time.Duration // safety poll while idle, default 1s
	LeaseInterval time.Duration // how often a standby node tries to take the lease, default 1s
	StatsInterval time.Duration // how often the leader refreshes the lag gauges, default 5s
	BackoffMin    time.Duration // first retry pause after a failure, default 100ms
	BackoffMax    time.Duration // retry pause cap, default 10s
	// HandOverAfter is how long a leader's Kafka writes may fail before
	// it hands the lease to a relay standing by on another node, which
	// may reach Kafka where this one does not (its network, its
	// settings); default 30s.
	HandOverAfter time.Duration
	// Entries reads the entries that outbox rows reference (the store);
	// without it such rows cannot be published and are dropped.
	Entries chat.EntryReader

	WriteTimeout time.Duration // one Kafka write, default 10s; bounds how long Run takes to stop
	LockKey      int64         // advisory lock key, default DefaultLockKey

	Logger     *slog.Logger          // default slog.Default(); the package adds component and the topic, so give it neither
	Registerer prometheus.Registerer // nil: metrics are not registered
	// Tracer traces each traced row's Kafka write (chat.relay.publish, a
	// child of the row's trace context); nil: tracing off, and a row's
	// trace context goes into its record's headers as it was stored.
	Tracer *tracing.Tracer
}

func (c *Config) defaults() {
	c.Topic = orDefault(c.Topic, DefaultTopic)
	c.BatchSize = orDefault(c.BatchSize, 500)
	c.MaxBatchBytes = orDefault(c.MaxBatchBytes, 1<<20)
	c.PollInterval = orDefault(c.PollInterval, time.Second)
	c.LeaseInterval = orDefault(c.LeaseInterval, time.Second)
	c.StatsInterval = orDefault(c.StatsInterval, 5*time.Second)
	c.BackoffMin = orDefault(c.BackoffMin, 100*time.Millisecond)
	c.BackoffMax = orDefault(c.BackoffMax, 10*time.Second)
	c.HandOverAfter = orDefault(c.HandOverAfter, 30*time.Second)
	c.WriteTimeout = orDefault(c.WriteTimeout, 10*time.Second)
	c.LockKey = orDefault(c.LockKey, DefaultLockKey)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Relay publishes the outbox to Kafka. See the package documentation for
// the contract.
type Relay struct {
	cfg  Config
	conn *pgx.ConnConfig
	log  *slog.Logger
	m    *relayMetrics

	mu     sync.Mutex
	kicked bool               // a Kick arrived since the last wait
	wake   context.CancelFunc // cancels the current wait, nil when not waiting

	running atomic.Bool
	leading atomic.Bool // holds the lease and publishes

	// topicReady: the topic was found or created (Config.Partitions).
	// Run's goroutine alone uses it.
	topicReady bool
	// budget bounds the bytes of one Kafka write (MaxBatchBytes until
	// Kafka refused a batch as too large: see fitBudget). Run's goroutine
	// alone uses it.
	budget int
	// single: the next write carries one row, to find which of a
	// partition's batch Kafka refuses for good (see fitBudget). Run's
	// goroutine alone uses it.
	single bool
}

// New returns a relay for the database behind pool. The relay does not use
// the pool's connections: it opens one dedicated connection (same settings)
// that carries the lease, LISTEN and its queries, so it must reach
// PostgreSQL directly or through a session-mode pooler.
func New(pool *pgxpool.Pool, cfg Config) (*Relay, error) {
	if pool == nil {
		return nil, errors.New("relay: nil pool")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("relay: no Kafka brokers configured")
	}
	cfg.defaults()
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = cfg.BackoffMin
	}
	m, err := newRelayMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return &Relay{
		cfg:  cfg,
		conn: pool.Config().ConnConfig,
		log:  cfg.Logger.With("component", "relay", "topic", cfg.Topic),
		m:    m,
	}, nil
}

// Leading reports whether this relay holds the lease and publishes the
// outbox now, so that a Kick reaches the publisher and a NOTIFY for
// other nodes is not needed.
func (r *Relay) Leading() bool { return r.leading.Load() }

// Publish wakes the relay for stored events this node committed
// (chat.Publisher: the delivery hub passes them on); it never blocks.
func (r *Relay) Publish(...chat.Event) { r.Kick() }

// Kick tells the relay that outbox rows were committed. It never blocks and
// is safe to call from any goroutine at any time, also when Run is not
// running; kicks that arrive while a batch is in flight coalesce into one.
func (r *Relay) Kick() {
	r.mu.Lock()
	r.kicked = true
	if r.wake != nil {
		r.wake()
	}
	r.mu.Unlock()
}

// Run relays until ctx is cancelled, then returns nil once its last Kafka
// write (bounded by WriteTimeout) is settled and its connections are
// closed. It returns an error only when called twice. Infrastructure
// failures are retried forever with backoff; they are logged on each change
// of state and counted in chat_relay_errors_total.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("relay: Run called twice")
	}
	w, transport := r.newWriter()
	defer func() {
		closeWriter(w, transport)
		r.m.leader.Set(0)
		r.m.lag.Set(0)
		r.m.pending.Set(0)
	}()

	var (
		conn     *pgx.Conn
		dbFails  int
		standing bool // logged "standing by" since the last change
	)
	defer func() { closeConn(conn) }()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := r.connect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				dbFails++
				r.dbFailed(dbFails, err)
				retry.Sleep(ctx, retry.Backoff(dbFails, r.cfg.BackoffMin, r.cfg.BackoffMax))
				continue
			}
			conn = c
		}
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", r.cfg.LockKey).Scan(&got); err != nil {
			if ctx.Err() != nil {
				break
			}
			conn = r.reconnect(ctx, conn)
			dbFails++
			r.dbFailed(dbFails, fmt.Errorf("try relay lease: %w", err))
			retry.Sleep(ctx, retry.Backoff(dbFails, r.cfg.BackoffMin, r.cfg.BackoffMax))
			continue
		}
		if dbFails > 0 {
			r.log.Info("relay: database reachable again", "failures", dbFails)
			dbFails = 0
		}
		if !got {
			if !standing {
				r.log.Info("relay: standing by, another node holds the lease")
				standing = true
			}
			retry.Sleep(ctx, r.cfg.LeaseInterval)
			continue
		}

		standing = false
		r.budget = r.cfg.MaxBatchBytes
		r.log.Info("relay: took the lease, publishing the outbox")
		r.leading.Store(true)
		r.m.leader.Set(1)
		err := r.lead(ctx, conn, w)
		r.leading.Store(false)
		r.m.leader.Set(0)
		r.m.lag.Set(0)
		r.m.pending.Set(0)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, errHandOver) {
			// No write of this lease may land after the standby's: the
			// writer is closed (it waits for what it has in flight) and
			// a new one made.
			closeWriter(w, transport)
			w, transport = r.newWriter()
			if err := r.release(ctx, conn); err != nil {
				conn = r.reconnect(ctx, conn)
			}
			r.log.Warn("relay: Kafka writes failed for too long; handed the lease to a relay standing by", "after", r.cfg.HandOverAfter)
			// Long enough for the standby, which tries every
			// LeaseInterval, to take it first.
			retry.Sleep(ctx, 3*r.cfg.LeaseInterval)
			continue
		}
		// Closing the session releases the lease, also after an error
		// that left the connection in an unknown state.
		conn = r.reconnect(ctx, conn)
		dbFails++
		r.m.errors.WithLabelValues(kindDB).Inc()
		r.log.Warn("relay: lost the lease", "err", err)
		retry.Sleep(ctx, retry.Backoff(dbFails, r.cfg.BackoffMin, r.cfg.BackoffMax))
	}
	r.log.Info("relay: stopped")
	return nil
}

// reconnectTimeout bounds the fresh session reconnect opens.
const reconnectTimeout = 5 * time.Second

// reconnect replaces a session that failed (closing it releases the
// lease) by a fresh one, opened first, on which the relay stands by
// through its backoff: a pruner beside it (relayPresent) must see a relay
// session all along, or it would delete the rows the relay has not
// published yet. Nil when the database cannot be reached: Run connects
// again after the backoff.
func (r *Relay) reconnect(ctx context.Context, old *pgx.Conn) *pgx.Conn {
	cctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	c, err := r.connect(cctx)
	closeConn(old)
	if err != nil {
		return nil
	}
	return c
}

// errHandOver ends a lease whose Kafka writes failed for HandOverAfter
// while another relay stands by.
var errHandOver = errors.New("relay: handing the lease over")

// release gives the lease up and stops listening, keeping the session:
// a pruner beside the relay must see a relay session all along, and a
// standby's session must not buffer the notifications of every commit.
func (r *Relay) release(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", r.cfg.LockKey); err != nil {
		return fmt.Errorf("release relay lease: %w", err)
	}
	if _, err := conn.Exec(ctx, "UNLISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("unlisten %s: %w", NotifyChannel, err)
	}
	return nil
}

// standbySQL tells whether a relay session other than this one is
// connected to the database: one standing by for the lease.
const standbySQL = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
	WHERE application_name = 'chatd-relay' AND datname = current_database() AND pid <> pg_backend_pid())`

func closeWriter(w *kafka.Writer, transport *kafka.Transport) {
	_ = w.Close()
	transport.CloseIdleConnections()
}

func (r *Relay) dbFailed(n int, err error) {
	r.m.errors.WithLabelValues(kindDB).Inc()
	if n == 1 {
		r.log.Warn("relay: database unavailable, retrying with backoff", "err", err)
	}
}

func (r *Relay) newWriter() (*kafka.Writer, *kafka.Transport) {
	transport := &kafka.Transport{
		DialTimeout:    5 * time.Second,
		MetadataTopics: []string{r.cfg.Topic},
		ClientID:       "chatd-relay-" + r.cfg.NodeID,
	}
	w := &kafka.Writer{
		Addr:     kafka.TCP(r.cfg.Brokers...),
		Topic:    r.cfg.Topic,
		Balancer: &kafka.Hash{}, // a key (conversation) always maps to one partition
		// One attempt per write: retries are ours, with backoff and jitter,
		// and never reorder a key because a failed row is never skipped.
		MaxAttempts:            1,
		BatchSize:              r.cfg.BatchSize,
		BatchBytes:             int64(r.cfg.MaxBatchBytes),
		BatchTimeout:           time.Millisecond,
		ReadTimeout:            r.cfg.WriteTimeout,
		WriteTimeout:           r.cfg.WriteTimeout,
		RequiredAcks:           kafka.RequireAll,
		AllowAutoTopicCreation: r.cfg.Partitions == 0,
		Transport:              transport,
		ErrorLogger:            kafkaLogger(r.log, slog.LevelDebug, nil),
	}
	return w, transport
}

// connect opens the relay's dedicated session, which the server ends
// within about 25 s of a leader's host vanishing without closing its
// socket (pgembed.EndIfClientVanishes), so the lease moves on promptly:
// other nodes' NOTIFYs queued for the leader would otherwise have the
// server retransmit for about 15 minutes with the lease held.
func (r *Relay) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := r.conn.Copy()
	pgembed.EndIfClientVanishes(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect relay session: %w", err)
	}
	_, err = conn.Exec(ctx, `SELECT set_config('application_name', 'chatd-relay', false)`)
	if err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("configure relay session: %w", err)
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) {
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// lead publishes while this node holds the lease. It returns nil when ctx
// is done, an error when the database failed (the lease may be gone), and
// errHandOver when Kafka writes failed for HandOverAfter while another
// relay stands by. Kafka failures are otherwise retried here, with
// backoff, keeping the lease: rows accumulate in the outbox meanwhile.
func (r *Relay) lead(ctx context.Context, conn *pgx.Conn, w *kafka.Writer) error {
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("listen %s: %w", NotifyChannel, err)
	}
	var (
		attempt   int       // consecutive failed Kafka writes
		downSince time.Time // first failure of the current outage
		retryAt   time.Time // no Kafka write before this
		nextStats time.Time
		nextWant  time.Time
	)
	for {
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		if !now.Before(nextWant) {
			// Outbox rows stay wanted while a relay leads: a pruner
			// (a node without Kafka) turns them off only after its
			// retention without this.
			if _, err := conn.Exec(ctx, wantOutboxSQL); err != nil {
				return ctxOr(ctx, fmt.Errorf("want outbox rows: %w", err))
			}
			nextWant = now.Add(wantInterval)
		}
		if !now.Before(nextStats) {
			if err := r.refreshStats(ctx, conn); err != nil {
				return ctxOr(ctx, err)
			}
			nextStats = now.Add(r.cfg.StatsInterval)
		}
		if !now.Before(retryAt) {
			more, err := r.publishBatch(ctx, conn, w)
			var kerr *kafkaError
			switch {
			case err == nil:
				if attempt > 0 {
					r.log.Info("relay: Kafka writes succeed again", "failures", attempt, "down_for", time.Since(downSince).Round(time.Millisecond))
				}
				attempt, retryAt = 0, time.Time{}
				if more {
					continue // drain what accumulated before waiting
				}
			case errors.As(err, &kerr):
				r.m.errors.WithLabelValues(kindKafka).Inc()
				attempt++
				if attempt == 1 {
					downSince = now
					r.log.Warn("relay: Kafka write failed, rows stay in the outbox; retrying with backoff", "err", writeFailure(kerr.err))
				}
				if time.Since(downSince) >= r.cfg.HandOverAfter {
					var standby bool
					if err := conn.QueryRow(ctx, standbySQL).Scan(&standby); err != nil {
						return ctxOr(ctx, fmt.Errorf("look for a relay standing by: %w", err))
					}
					if standby {
						return errHandOver
					}
				}
				retryAt = time.Now().Add(retry.Backoff(attempt, r.cfg.BackoffMin, r.cfg.BackoffMax))
			default:
				return ctxOr(ctx, err)
			}
		}

		until := now.Add(r.cfg.PollInterval)
		if retryAt.After(now) {
			until = retryAt
		}
		if nextStats.Before(until) {
			until = nextStats
		}
		if err := r.wait(ctx, conn, time.Until(until)); err != nil {
			return ctxOr(ctx, err)
		}
	}
}

// wantOutboxSQL says outbox rows are wanted, turning them on if a pruner
// had turned them off (migrations/functions.sql, chat_want_outbox).
const wantOutboxSQL = `SELECT chat_want_outbox()`

// wantInterval is how often a leading relay says outbox rows are wanted:
// well within a pruner's retention (an hour by default).
const wantInterval = time.Minute

// ctxOr returns nil when ctx is done (the error is a consequence of the
// cancellation), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// wait blocks for up to d until a notification, a Kick or ctx.
func (r *Relay) wait(ctx context.Context, conn *pgx.Conn, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	r.mu.Lock()
	if r.kicked {
		r.kicked = false
		r.mu.Unlock()
		return nil
	}
	r.wake = cancel
	r.mu.Unlock()

	_, err := conn.WaitForNotification(wctx)

	r.mu.Lock()
	r.wake = nil
	r.kicked = false // this wake-up covers it: the next batch reads after it
	r.mu.Unlock()
	if err != nil && wctx.Err() == nil {
		return fmt.Errorf("wait for %s: %w", NotifyChannel, err)
	}
	return nil
}

// skipNotifications drops the notifications the session has received
// but not handed out: the batch read that follows sees every row they
// announce (they came after their commits). Each would otherwise end a
// wait of its own and cost a read: the notifications of every commit of
// other nodes during a batch's write came one loop and one SELECT each.
func skipNotifications(conn *pgx.Conn) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		// With ctx done, pgx hands out what it holds and never reads
		// the socket.
		if n, err := conn.WaitForNotification(done); n == nil || err != nil {
			return
		}
	}
}

// kafkaError marks a failed Kafka write: retried with the lease kept.
type kafkaError struct{ err error }

func (e *kafkaError) Error() string { return "write to Kafka: " + e.err.Error() }
func (e *kafkaError) Unwrap() error { return e.err }

type outboxRow struct {
	id        int64
	key       string
	value     []byte // the event JSON with eventId
	typ       string
	origin    string
	createdAt time.Time
	trace     chat.TraceContext // of the write that made it; empty: not traced
}

// selectBatch reads the oldest rows: a row that references a stream entry
// (payload NULL) names it, every other row carries its event JSON.
const selectBatch = `
SELECT id, msg_key, type, payload::text, origin, created_at, conversation_id, seq,
       COALESCE(traceparent, ''), COALESCE(tracestate, '')
FROM outbox ORDER BY id LIMIT $1`

// publishBatch writes the oldest outbox rows to Kafka in one synchronous
// write and deletes the rows Kafka acknowledged. more reports that the
// batch was full, so more rows are probably waiting. Errors are a
// *kafkaError (rows kept, retry later) or a database error.
func (r *Relay) publishBatch(ctx context.Context, conn *pgx.Conn, w *kafka.Writer) (more bool, err error) {
	rows, err := r.readBatch(ctx, conn)
	if err != nil {
		return false, err
	}
	if len(rows) == 0 {
		r.m.lag.Set(0)
		r.m.pending.Set(0)
		return false, nil
	}
	more = len(rows) == r.cfg.BatchSize
	if !r.topicReady && r.cfg.Partitions > 0 {
		if err := r.ensureTopic(ctx); err != nil {
			return false, &kafkaError{err: err}
		}
		r.topicReady = true
	}

	// Keep the batch under MaxBatchBytes so that kafka-go puts each
	// partition's messages in a single produce request: the request
	// succeeds or fails as a whole, and a conversation's rows are never
	// half published out of order. A row too large on its own can never be
	// published; it is dropped (logged and counted) so it cannot wedge the
	// relay.
	msgs := make([]kafka.Message, 0, len(rows))
	ids := make([]int64, 0, len(rows))
	var spans []rowSpan // the traced rows' spans, tracing on
	var drop []int64
	total := 0
	single := r.single
	r.single = false
	for _, row := range rows {
		if row.value == nil {
			drop = append(drop, row.id) // readBatch logged it
			continue
		}
		size := messageSize(row)
		if size > r.cfg.MaxBatchBytes {
			r.m.errors.WithLabelValues(kindOversize).Inc()
			r.log.Error("relay: outbox row too large for Kafka, dropped", "eventId", row.id, "key", row.key, "type", row.typ, "bytes", size)
			drop = append(drop, row.id)
			continue
		}
		if len(msgs) > 0 && (single || total+size > r.budget) {
			more = true
			break
		}
		total += size
		headers := []kafka.Header{
			{Key: "eventId", Value: []byte(strconv.FormatInt(row.id, 10))},
			{Key: "type", Value: []byte(row.typ)},
			{Key: "origin", Value: []byte(row.origin)},
		}
		if row.trace.Parent != "" {
			tc := row.trace
			if span := r.startRowSpan(row); span != nil {
				spans = append(spans, rowSpan{i: len(msgs), span: span})
				tc = tracing.FromSpanContext(span.SpanContext())
			}
			headers = appendTraceHeaders(headers, tc)
		}
		msgs = append(msgs, kafka.Message{
			Key:     []byte(row.key),
			Value:   row.value,
			Time:    row.createdAt,
			Headers: headers,
		})
		ids = append(ids, row.id)
	}

	var werr error
	done := append([]int64(nil), drop...)
	if len(msgs) > 0 {
		// The write is not cut short by ctx: a relay that stops waits for
		// its last write (at most WriteTimeout) so it can delete what Kafka
		// took instead of leaving it to be published twice.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WriteTimeout)
		werr = w.WriteMessages(wctx, msgs...)
		cancel()
		ok := acknowledged(werr, len(msgs))
		for _, s := range spans {
			if !ok[s.i] {
				tracing.FailTransport(s.span, fmt.Errorf("write to Kafka: %w", werr))
			}
			s.span.End()
		}
		n := 0
		for i, id := range ids {
			if ok[i] {
				done = append(done, id)
				n++
			}
		}
		if n > 0 {
			r.m.published.Add(float64(n))
			r.m.batchSize.Observe(float64(n))
		}
		if refused, why := r.fitBudget(werr, total); refused >= 0 {
			// Refused on its own for what it is: it can never be published.
			row := rows[slices.IndexFunc(rows, func(o outboxRow) bool { return o.id == ids[refused] })]
			if refusedTooLarge(why) {
				r.m.errors.WithLabelValues(kindOversize).Inc()
				r.log.Error("relay: Kafka refused an outbox row as too large, dropped", "eventId", row.id, "key", row.key, "type", row.typ, "bytes", messageSize(row))
			} else {
				r.m.errors.WithLabelValues(kindRefused).Inc()
				r.log.Error("relay: Kafka refused an outbox row, dropped", "eventId", row.id, "key", row.key, "type", row.typ, "err", why)
			}
			done = append(done, row.id)
		}
		if onlyRefusedForGood(werr) {
			// Nothing failed that smaller writes, at once, do not mend.
			werr, more = nil, true
		}
	}
	if len(done) > 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WriteTimeout)
		_, err := conn.Exec(dctx, "DELETE FROM outbox WHERE id = ANY($1)", done)
		cancel()
		if err != nil {
			return false, fmt.Errorf("delete published outbox rows: %w", err)
		}
	}
	if werr != nil {
		return false, &kafkaError{err: werr}
	}
	if !more {
		// Everything visible when the batch was read is now published.
		r.m.lag.Set(0)
		r.m.pending.Set(0)
	}
	return more, nil
}

// ensureTopic creates the topic with Config.Partitions partitions if it
// does not exist: before the relay's first write, since a write to a
// missing topic has the broker create it with its default count (1 in
// Kafka's own configuration), for good, when the node could not ensure it
// as it started (Kafka unreachable then). A topic that exists is left as
// it is, without asking for CreateTopics, which a broker may refuse a
// client allowed to write.
func (r *Relay) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	defer cancel()
	created, err := EnsureTopicIfMissing(ctx, r.cfg.Brokers, "chatd-relay-"+r.cfg.NodeID, r.cfg.Topic, r.cfg.Partitions)
	if created {
		r.log.Info("relay: created the topic", "partitions", r.cfg.Partitions)
	}
	return err
}

// EnsureTopicIfMissing is EnsureTopic for a topic that metadata (asked as
// clientID, without auto creation) does not show: a topic that exists is
// left as it is without asking for CreateTopics, which a broker may
// refuse a client allowed to write. created reports that it created it.
func EnsureTopicIfMissing(ctx context.Context, brokers []string, clientID, topic string, partitions int) (created bool, err error) {
	transport := &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: clientID}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return false, fmt.Errorf("ensure topic %s: metadata: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name == topic && t.Error == nil && len(t.Partitions) > 0 {
			return false, nil
		}
	}
	if err := EnsureTopic(ctx, brokers, topic, partitions); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Relay) readBatch(ctx context.Context, conn *pgx.Conn) ([]outboxRow, error) {
	skipNotifications(conn)
	rs, err := conn.Query(ctx, selectBatch, r.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("read outbox batch: %w", err)
	}
	var (
		out      []outboxRow
		payloads []*string
		refs     []*chat.MessageRef
		want     []chat.MessageRef
	)
	for rs.Next() {
		var (
			row       outboxRow
			payload   *string
			conv, seq *int64
		)
		if err := rs.Scan(&row.id, &row.key, &row.typ, &payload, &row.origin, &row.createdAt, &conv, &seq,
			&row.trace.Parent, &row.trace.State); err != nil {
			rs.Close()
			return nil, fmt.Errorf("scan outbox row: %w", err)
		}
		var ref *chat.MessageRef
		if payload == nil && conv != nil && seq != nil {
			ref = &chat.MessageRef{ConversationID: *conv, Seq: *seq}
			want = append(want, *ref)
		}
		out, payloads, refs = append(out, row), append(payloads, payload), append(refs, ref)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read outbox batch: %w", err)
	}
	var entries map[chat.MessageRef]chat.Message
	if len(want) > 0 && r.cfg.Entries != nil {
		// Entries as they are now: a message recalled since its row was
		// written is relayed without its body. A reply quotes as it was
		// sent, as the committing node delivered it live.
		if entries, err = r.cfg.Entries.Entries(ctx, want); err != nil {
			return nil, fmt.Errorf("read outbox entries: %w", err)
		}
	}
	for i := range out {
		ev, err := outboxEvent(out[i].id, payloads[i], refs[i], entries)
		if err == nil {
			ev.EventID = out[i].id
			out[i].value, err = chat.EncodeEvent(ev)
		}
		if err != nil {
			// Published it can never be: dropped (publishBatch) rather
			// than wedging the relay behind it.
			out[i].value = nil
			r.m.errors.WithLabelValues(kindDecode).Inc()
			r.log.Error("relay: outbox row cannot be encoded, dropped", "eventId", out[i].id, "key", out[i].key, "type", out[i].typ, "err", err)
		}
	}
	return out, nil
}

// outboxEvent is the event of one outbox row: its payload decoded, or the
// event of the entry it references.
func outboxEvent(rowID int64, payload *string, ref *chat.MessageRef, entries map[chat.MessageRef]chat.Message) (chat.Event, error) {
	var ev chat.Event
	if payload != nil {
		if err := json.Unmarshal([]byte(*payload), &ev); err != nil {
			return ev, fmt.Errorf("decode outbox payload %d: %w", rowID, err)
		}
		return ev, nil
	}
	if ref == nil {
		return ev, fmt.Errorf("outbox row %d has neither payload nor entry", rowID)
	}
	m, ok := entries[*ref]
	if !ok {
		return ev, fmt.Errorf("outbox row %d references entry %d/%d, which is not stored", rowID, ref.ConversationID, ref.Seq)
	}
	return chat.EntryEvent(m.UTC()), nil
}

// messageSize bounds from above what kafka-go counts for a message: key,
// value, timestamp and the headers (a trace context is as long as the one
// stored, the relay's own span id taking the stored one's place).
func messageSize(row outboxRow) int {
	n := 64 + len(row.key) + len(row.value) + len("eventId") + 20 + len("type") + len(row.typ) + len("origin") + len(row.origin)
	if row.trace.Parent != "" {
		n += len(tracing.HeaderTraceparent) + len(row.trace.Parent) + len(tracing.HeaderTracestate) + len(row.trace.State)
	}
	return n
}

// rowSpan is the span of the traced message msgs[i].
type rowSpan struct {
	i    int
	span trace.Span
}

// startRowSpan starts the span of one traced row's Kafka write, a child
// of the row's trace context: nil when tracing is off or the trace is not
// sampled (the stored context then goes on as it is).
func (r *Relay) startRowSpan(row outboxRow) trace.Span {
	if r.cfg.Tracer == nil {
		return nil
	}
	_, span := r.cfg.Tracer.Start(tracing.Extract(context.Background(), row.trace), tracing.SpanRelayPublish,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			attribute.String("messaging.system", "kafka"), attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", r.cfg.Topic), attribute.String("messaging.kafka.message.key", row.key),
			tracing.AttrEventType.String(row.typ), tracing.AttrEventID.Int64(row.id)))
	if !span.IsRecording() {
		span.End()
		return nil
	}
	return span
}

// appendTraceHeaders adds tc as W3C headers, which Kafka instrumentations
// (OpenTelemetry's among them) read to continue the trace.
func appendTraceHeaders(h []kafka.Header, tc chat.TraceContext) []kafka.Header {
	h = append(h, kafka.Header{Key: tracing.HeaderTraceparent, Value: []byte(tc.Parent)})
	if tc.State != "" {
		h = append(h, kafka.Header{Key: tracing.HeaderTracestate, Value: []byte(tc.State)})
	}
	return h
}

// refusedForGood reports whether Kafka refused a message for what it is,
// so that it is refused every time it is sent again: too large
// (refusedTooLarge), a timestamp outside what the topic accepts
// (INVALID_TIMESTAMP: message.timestamp.before.max.ms and a backlog older
// than it, or .after.max.ms and a clock ahead of the broker's), or a
// record the broker's validation rejects (INVALID_RECORD). The other
// errors are of the moment (a leader moving, a broker down) or of the
// cluster's settings (authorization, acks, a message format or
// compression the broker does not take), which dropping rows does not
// mend: those writes are retried.
func refusedForGood(err error) bool {
	return refusedTooLarge(err) || errors.Is(err, kafka.InvalidTimestamp) || errors.Is(err, kafka.InvalidRecord)
}

// refusedTooLarge reports whether Kafka refused a message as too large:
// over max.message.bytes (MESSAGE_TOO_LARGE), or its partition's record
// batch over the log's segment.bytes (RECORD_LIST_TOO_LARGE), which
// Kafka's own producer takes the same way (it splits the batch).
func refusedTooLarge(err error) bool {
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge)
}

// fitBudget finds the messages Kafka refuses for good (refusedForGood)
// among those of a write of total bytes that failed. kafka-go sends the
// batch of one partition in one request, and each of its messages gets
// that request's error, so a message refused alone was its partition's
// whole batch: it can never be published, and fitBudget returns its index
// and its error; else -1. When more than one was refused, the refusal may
// be of one of them only, or of the batch's size: a broker whose limit on
// a produce request (max.message.bytes of the topic or the broker, or
// the log's segment.bytes: RECORD_LIST_TOO_LARGE) is
// below MaxBatchBytes refuses a partition's batch as a whole, every time
// it is sent again, so after messages refused as too large the following
// writes take at most half of total bytes, until the relay next takes the
// lease; after others the next write carries one row, and so in turn
// until the refused row is found.
func (r *Relay) fitBudget(werr error, total int) (int, error) {
	var werrs kafka.WriteErrors
	if !errors.As(werr, &werrs) {
		return -1, nil
	}
	refused, n, tooLarge := -1, 0, 0
	for i, e := range werrs {
		if e != nil && refusedForGood(e) {
			refused = i
			n++
			if refusedTooLarge(e) {
				tooLarge++
			}
		}
	}
	switch {
	case n == 1:
		return refused, werrs[refused]
	case tooLarge > 1:
		r.budget = max(1, total/2)
		r.log.Warn("relay: Kafka refused a batch as too large (the topic's max.message.bytes or segment.bytes is below the relay's batch bytes); writing smaller batches", "bytes", r.budget)
	case n > 1:
		r.single = true
	}
	return -1, nil
}

// onlyRefusedForGood reports whether every message a write failed for was
// refused for what it is (refusedForGood).
func onlyRefusedForGood(werr error) bool {
	var werrs kafka.WriteErrors
	if werr == nil || !errors.As(werr, &werrs) {
		return false
	}
	for _, e := range werrs {
		if e != nil && !refusedForGood(e) {
			return false
		}
	}
	return true
}

// writeFailure says what failed in a Kafka write, each distinct error
// once with the number of messages it failed: kafka-go's WriteErrors
// repeats a partition's error for every message of it, which made one
// refused batch of hundreds of rows a log line of tens of kilobytes.
func writeFailure(err error) string {
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) {
		return err.Error()
	}
	var distinct []string
	count := map[string]int{}
	for _, e := range werrs {
		if e == nil {
			continue
		}
		s := e.Error()
		if count[s] == 0 {
			distinct = append(distinct, s)
		}
		count[s]++
	}
	for i, s := range distinct {
		distinct[i] = fmt.Sprintf("%s (%d messages)", s, count[s])
	}
	return fmt.Sprintf("%d of %d messages failed: %s", werrs.Count(), len(werrs), strings.Join(distinct, "; "))
}

// acknowledged reports, per message, whether Kafka acknowledged it.
func acknowledged(err error, n int) []bool {
	ok := make([]bool, n)
	if err == nil {
		for i := range ok {
			ok[i] = true
		}
		return ok
	}
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) && len(werrs) == n {
		for i, e := range werrs {
			ok[i] = e == nil
		}
	}
	return ok
}

// statsExact is the backlog up to which chat_relay_pending_rows is an
// exact count.
const statsExact = 10000

// statsSQL measures the backlog on the index of outbox ids, reading at
// most statsExact rows: a count of every row, every StatsInterval on the
// relay's own connection, read a whole backlog of millions just as the
// relay drains it (0.3-0.5 s of each 5 s at 2 million rows). Past
// statsExact rows it is the span of ids left, an upper bound (ids a rolled
// back transaction took count too); the lag is the age of the row with
// the lowest id, the next to go.
const statsSQL = `
WITH few AS (SELECT count(*) AS n FROM (SELECT 1 FROM outbox LIMIT $1) s)
SELECT CASE WHEN few.n < $1 THEN few.n
            ELSE COALESCE((SELECT max(id) FROM outbox) - (SELECT min(id) FROM outbox) + 1, 0) END,
       COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - (SELECT created_at FROM outbox ORDER BY id LIMIT 1)), 0)::float8
FROM few`

func (r *Relay) refreshStats(ctx context.Context, conn *pgx.Conn) error {
	var n int64
	var age float64
	err := conn.QueryRow(ctx, statsSQL, statsExact).Scan(&n, &age)
	if err != nil {
		return fmt.Errorf("measure outbox lag: %w", err)
	}
	r.m.pending.Set(float64(n))
	r.m.lag.Set(max(age, 0))
	return nil
}
