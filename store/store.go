package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgerr"
	"github.com/chatd/chatd/internal/tracing"
)

// Store implements chat.Store on PostgreSQL. Sends are group-committed:
// concurrent sends share transactions (see batcher); Close stops the
// batcher's goroutines.
type Store struct {
	pool   *pgxpool.Pool
	limits chat.Limits

	batching     bool
	maxBatch     int
	maxInflight  int // send transactions in flight at most
	batchTimeout time.Duration
	batchOnce    sync.Once
	batch        atomic.Pointer[batcher] // set once by batchOnce; nil after Close without sends
	closed       atomic.Bool
	batchCount   atomic.Int64
	batchMsgs    atomic.Int64
	sendPool     *pgxpool.Pool // group-commit transactions; nil = pool
	publisher    chat.Publisher
	// profileOrder orders the publishing of each user's profile.updated
	// (lockProfile), groupOrder of each group's changes (changeTx).
	profileOrder publishOrder
	groupOrder   publishOrder
	// relayWake says whether a committed outbox row needs a NOTIFY to
	// reach the relay; nil means always.
	relayWake func() bool
	// searchScan: WithSearchScanLimit (nil: chosen per query, see
	// searchByScan); searchStats the lexeme frequencies that choice reads.
	searchScan  *int64
	searchStats searchStats
	tracer      *tracing.Tracer // nil: tracing off
	// uploadTypes are the attachment types a send may attach (nil: the
	// defaults).
	uploadTypes []string
	// largeGroup: conversations of more members share no presence
	// (WithLargeGroup).
	largeGroup int
	// unpublished: the changes of send batches answered with a failure
	// whose outcome was not learnt, whose resends are published.
	unpublished unpublished
	// outcomes: the other writes whose outcome was not learnt, asked
	// about until it is (outcomes.go).
	outcomes outcomes
}

var _ chat.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithBatching sets the group-commit limits: at most maxBatch sends per
// transaction and at most maxInflight transactions in flight (more than
// one only while one is slow: see batcher). maxInflight <= 0 disables
// group commit (one transaction per send).
func WithBatching(maxBatch, maxInflight int) Option {
	return func(s *Store) {
		s.batching = maxInflight > 0
		if maxBatch > 0 {
			s.maxBatch = maxBatch
		}
		if maxInflight > 0 {
			s.maxInflight = maxInflight
		}
	}
}

// WithSendTimeout sets the longest a send's transaction may take, when
// its caller's context allows that long (default 10s): a batch commits
// within the earliest deadline of its callers and this.
func WithSendTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.batchTimeout = d
		}
	}
}

// WithSendPool gives group commit connections of its own, so sends never
// queue behind reads (history pages, delivery catch-up) for a connection.
func WithSendPool(p *pgxpool.Pool) Option {
	return func(s *Store) { s.sendPool = p }
}

// WithPublisher gives the store the port every write publishes what it
// committed to, right after the commit and before its caller is answered:
// group commit publishes a batch's messages in seq order per conversation
// (callers answered one by one would wake in any order and the fan-out
// would see gaps). Without it nothing is published.
func WithPublisher(p chat.Publisher) Option {
	return func(s *Store) { s.publisher = p }
}

// publish hands committed events to the publisher.
func (s *Store) publish(evs ...chat.Event) {
	if s.publisher != nil && len(evs) > 0 {
		s.publisher.Publish(evs...)
	}
}

// WithRelayWake tells hot write paths (group commit, receipt batches)
// whether they must NOTIFY chat_outbox after a commit that wrote outbox
// rows. needed is called after each such commit; it answers false when no
// relay listens on another node: no Kafka is configured, or this node's
// relay publishes and is woken in-process. A wake-up skipped wrongly (a
// lease that just moved) costs only latency: relays also poll. Without
// this option they always notify.
func WithRelayWake(needed func() bool) Option {
	return func(s *Store) { s.relayWake = needed }
}

// WithTracer traces group commit (a span per change and per batch,
// linked) and writes the callers' trace context into the outbox rows and
// the published events; without it (or with nil) nothing is traced.
func WithTracer(t *tracing.Tracer) Option {
	return func(s *Store) { s.tracer = t }
}

// WithUploadTypes sets the attachment types a send's transaction accepts
// (chat.TypeAllowed syntax); the default is chat.DefaultUploadTypes.
func WithUploadTypes(types []string) Option {
	return func(s *Store) { s.uploadTypes = types }
}

// WithLargeGroup sets the member count above which a conversation shares
// no presence (CHAT_LARGE_GROUP): a removal that ends the last smaller
// one two users share tells them (presenceEnded). The default is
// chat.DefaultLargeGroup.
func WithLargeGroup(n int) Option {
	return func(s *Store) { s.largeGroup = n }
}

// New returns a Store on pool. limits.MaxMembers caps groups; zero fields
// take the chat defaults, the same as chat.NewService does.
func New(pool *pgxpool.Pool, limits chat.Limits, opts ...Option) *Store {
	s := &Store{pool: pool, limits: limits.WithDefaults(), batching: true, maxBatch: 256, maxInflight: 4, batchTimeout: 10 * time.Second}
	for _, o := range opts {
		o(s)
	}
	if s.largeGroup <= 0 {
		s.largeGroup = chat.DefaultLargeGroup
	}
	return s
}

// BatchStats reports how many send transactions ran and how many sends
// they carried.
func (s *Store) BatchStats() BatchStats {
	st := BatchStats{Batches: s.batchCount.Load(), Messages: s.batchMsgs.Load()}
	if b := s.batch.Load(); b != nil {
		st.Queued = len(b.intake) + int(b.waiting.Load())
	}
	return st
}

// Close stops group commit, sends still queued failing as unavailable,
// and the learning of outcomes not known (outcomes).
func (s *Store) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Group commit is stopped even when ctx ended while the learning of
	// outcomes stopped: Close runs once.
	var stopErr error
	if err := s.stopOutcomes(ctx); err != nil {
		stopErr = fmt.Errorf("stop learning outcomes: %w", err)
	}
	// Using up the Once means no batcher starts after this point, and
	// one that a concurrent first send is starting is started when Do
	// returns.
	s.batchOnce.Do(func() {})
	b := s.batch.Load()
	if b == nil {
		return stopErr
	}
	close(b.stop)
	select {
	case <-b.done:
	case <-ctx.Done():
		return errors.Join(stopErr, fmt.Errorf("stop send batcher: %w", ctx.Err()))
	}
drain:
	for {
		select {
		case r := <-b.intake:
			r.err = errShuttingDown()
			r.answer()
		default:
			break drain
		}
	}
	return stopErr
}

// readOnly is what the read paths run in: one snapshot for the membership
// check and the data, and no way to write by mistake.
func readOnly() pgx.TxOptions {
	return pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
}

// inTx runs fn in a READ COMMITTED transaction and commits it. READ
// COMMITTED is deliberate: after waiting for a row lock, the next statement
// sees what the previous lock holder committed, which the send and
// membership paths rely on. Errors come back classified for op.
//
// A COMMIT whose answer was lost with its connection (pgerr.AnswerLost)
// may have committed: inTx reads the transaction's id (if fn wrote
// anything) before it commits, asks the pool what became of it (pgerr.Committed), and
// answers nil when it committed, so its caller publishes the events it
// committed and answers success, as for any commit. A repeat would
// find the change made and publish nothing (an add answers "already a
// member"): members online would miss its events, and the node's member
// index an added member, for good. When the pool cannot tell either, the
// failure stands: a write that publishes events hands them to the
// goroutine that asks until it knows (learnLater, through inTxOutcome).
func (s *Store) inTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	_, err := s.inTxOutcome(ctx, op, fn, nil)
	return err
}

// inTxOutcome is inTx that also returns, with its failure, the id of a
// transaction whose COMMIT lost its answer and whose outcome the pool
// could not tell ("" for every other failure). atCommit, if not nil, is
// called right before the COMMIT goes out.
func (s *Store) inTxOutcome(ctx context.Context, op string, fn func(pgx.Tx) error, atCommit func()) (unknown string, err error) {
	err = s.inTxUnsettled(ctx, op, fn, atCommit)
	if d, ok := err.(*commitInDoubt); ok {
		return s.askOutcome(ctx, d)
	}
	return "", err
}

// commitInDoubt is the failure of a COMMIT whose answer was lost
// (pgerr.AnswerLost): transaction xid may have committed.
type commitInDoubt struct {
	op, xid string
	err     error
}

func (d *commitInDoubt) Error() string {
	return fmt.Sprintf("%s: commit: %v (whether it committed is not known yet)", d.op, d.err)
}

func (d *commitInDoubt) Unwrap() error { return d.err }

// inTxUnsettled is inTx that does not ask what became of a transaction
// whose COMMIT's answer was lost: it returns a *commitInDoubt for
// askOutcome, so that a caller that must not wait for the answer (a writer
// other callers queue behind) can ask elsewhere.
func (s *Store) inTxUnsettled(ctx context.Context, op string, fn func(pgx.Tx) error, atCommit func()) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return classify(op, fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return classify(op, err)
	}
	// NULL when fn wrote nothing (no id assigned, none taken for it):
	// then whether the COMMIT went through changes nothing.
	var xid *string
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid); err != nil {
		return classify(op, fmt.Errorf("read the transaction id: %w", err))
	}
	if atCommit != nil {
		atCommit()
	}
	err = tx.Commit(ctx)
	if err == nil || xid == nil && pgerr.AnswerLost(err) {
		return nil
	}
	if !pgerr.AnswerLost(err) {
		return classify(op, fmt.Errorf("commit: %w", err))
	}
	return &commitInDoubt{op: op, xid: *xid, err: err}
}

// askOutcome asks the pool what became of d's transaction
// (pgerr.Committed, up to 5 s): nil when it committed, else d's failure
// classified, with d's transaction id when the pool could not tell what
// became of it either (not when PostgreSQL said it did not commit): the
// caller hands the write's events to learnLater then.
func (s *Store) askOutcome(ctx context.Context, d *commitInDoubt) (unknown string, err error) {
	if cerr := pgerr.Committed(ctx, s.pool, d.xid); cerr != nil {
		err := classify(d.op, fmt.Errorf("commit: %w (whether it committed: %w)", d.err, cerr))
		if errors.Is(cerr, pgerr.ErrNotCommitted) {
			return "", err
		}
		return d.xid, err
	}
	return "", nil
}

// writeTx runs fn in a READ COMMITTED transaction together with the outbox
// rows of the events fn returns, commits, and publishes the events: the one
// way a write other than a send (group commit) and the receipt batches makes
// its events.
func (s *Store) writeTx(ctx context.Context, op string, fn func(pgx.Tx) ([]chat.Event, error)) error {
	var evs []chat.Event
	var tc chat.TraceContext
	if s.tracer != nil {
		tc = tracing.Inject(ctx)
	}
	var convs []int64
	unknown, err := s.inTxOutcome(ctx, op, func(tx pgx.Tx) error {
		var err error
		if evs, err = fn(tx); err != nil {
			return err
		}
		return insertOutbox(ctx, tx, tc, evs...)
	}, func() { convs = s.unsettle(evs) })
	for i := range evs {
		evs[i].Trace = tc
	}
	if unknown != "" {
		s.learnLater(unknown, evs, convs)
		return err
	}
	if err == nil {
		s.publish(evs...)
	}
	s.settle(convs)
	return err
}

func (s *Store) runTx(ctx context.Context, op string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return runTxOn(ctx, s.pool, op, opts, fn)
}

// beginner is a pool a transaction can start on.
type beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

func runTxOn(ctx context.Context, pool beginner, op string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, opts)
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

// classify turns err into what callers of op should see: the rule of
// pgerr.Classify, which the push device store answers by too.
func classify(op string, err error) error { return pgerr.Classify(op, err) }

// errNoConversation and errNotMember are the two answers every members-only
// operation gives; one wording keeps transports and clients consistent.
func errNoConversation(id int64) error { return chat.NoConversation(id) }

func errNotMember(id int64) error { return chat.NotMemberOf(id) }
