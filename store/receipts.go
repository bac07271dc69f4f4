package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/coalesce"
	"github.com/chatd/chatd/internal/pgerr"
	"github.com/chatd/chatd/internal/promreg"
	"github.com/chatd/chatd/internal/shutdown"
)

// ReceiptsConfig configures Receipts; zero values take the defaults.
type ReceiptsConfig struct {
	// MaxBatch caps the (conversation, user) pairs of one transaction (4096).
	MaxBatch int
	// DeliveredInterval is the least time between two delivered-watermark
	// transactions (250ms): acknowledgements arrive per message and per
	// device, the database sees one UPDATE per interval at most. Read
	// receipts have no such delay: an idle writer commits at once.
	DeliveredInterval time.Duration
	// FlushTimeout bounds one batch transaction (10s).
	FlushTimeout time.Duration
	// Delivered is where acknowledgements wait for their flush (the hub
	// puts them there); nil: a buffer of the Receipts' own.
	Delivered  *DeliveredBuffer
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics not registered
}

// Receipts group-commits the two per-member watermarks:
//
//   - read receipts (MarkRead): callers wait for the commit of the batch
//     their receipt joined. Receipts for the same (conversation, user) that
//     arrive while a batch is being written merge into the next one, which
//     carries the highest seq; the next batch starts as soon as the previous
//     one committed, so an idle writer adds no delay and a storm of N
//     receipts costs far fewer than N transactions. Each caller gets the
//     ReadResult it would have got had the merged receipts been applied one
//     by one in arrival order, and the final watermark is the same.
//   - delivered acknowledgements (Delivered): fire and forget, merged per
//     (conversation, user) to the highest seq and written at most once per
//     DeliveredInterval. A watermark that moved produces one
//     delivery.updated per sender of the messages it moved over (senderId:
//     the user the event is for), not one per member of the conversation,
//     so a message costs O(members) events, not O(members²).
//
// Each batch is one transaction. A read batch locks its member rows in
// (conversation, user) order, moves every watermark that advances with one
// set-based UPDATE ... FROM unnest(...) (clamped to last_seq, never
// backwards), and writes one read.updated per row that moved. A delivered
// batch first reads, without locks, which rows move and who sent the
// messages they move over, then commits in one round trip the outbox rows
// (one delivery.updated per row and sender) and the upsert into
// member_delivery, which moves rows forward only, in key order. It locks no
// conversation_member row, so group commit, which locks the senders' member
// rows, never waits for it nor it for group commit (migration 0009).
// Concurrency: MarkRead, Pending and Delivered are safe for concurrent use;
// one goroutine owns the read batches (a batch whose COMMIT's answer was
// lost is settled on one of its own, MaxSettlingReads at most, its pairs
// held out of later batches meanwhile) and one the delivered batches. Close
// stops accepting receipts, commits what is pending and waits for both.
type Receipts struct {
	st  *Store
	cfg ReceiptsConfig
	log *slog.Logger

	rmu     sync.Mutex
	reads   map[memberKey]*pendingRead
	rclosed bool
	rwake   chan struct{}
	// settling holds the pairs of read batches whose COMMIT's answer
	// was lost while another goroutine asks what became of them: their
	// next receipts wait for that, the other pairs' do not.
	settling map[memberKey]bool
	settlers sync.WaitGroup
	// settleSlots holds a token per settling goroutine (MaxSettlingReads).
	settleSlots chan struct{}

	delivered *DeliveredBuffer
	dwriter   *coalesce.Writer[memberKey, int64]
	// lostDelivered holds, per pair, the watermark and events of a
	// delivered write whose COMMIT's answer was lost: it may have
	// committed, and then writing it again moves nothing and makes no
	// event. Owned by the delivered writer's goroutine (flushDelivered).
	lostDelivered map[memberKey]lostDelivery

	readFlushes      atomic.Int64
	deliveredFlushes atomic.Int64
	m                receiptMetrics

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	failing  atomic.Bool
}

// DeliveredBuffer holds delivered acknowledgements until Receipts flushes
// them, merged per (conversation, user) to the highest seq. The delivery
// hub puts them (chat.DeliveredSink); it is made before both, so neither
// needs the other.
type DeliveredBuffer struct {
	m *coalesce.Map[memberKey, int64]
}

// MaxPendingDelivered bounds the (conversation, user) pairs waiting for a
// delivered flush; beyond it new pairs are dropped (their watermark moves
// with the next acknowledgement).
const MaxPendingDelivered = 1 << 20

// NewDeliveredBuffer returns an empty buffer.
func NewDeliveredBuffer() *DeliveredBuffer {
	return &DeliveredBuffer{m: coalesce.NewMap[memberKey, int64](coalesce.Max[int64], MaxPendingDelivered)}
}

// Delivered records that one of userID's sessions acknowledged message seq
// of conversationID. It never blocks.
func (b *DeliveredBuffer) Delivered(conversationID, userID, seq int64) {
	b.m.Put(memberKey{conversationID, userID}, seq)
}

// MaxSettlingReads bounds the goroutines that ask what became of read
// batches whose COMMIT's answer was lost (each up to 5 s): a batch in
// doubt beyond them is settled on the read writer itself, the other
// users' receipts waiting meanwhile, so an outage that leaves batch after
// batch in doubt does not pile them up, each asking PostgreSQL on the
// pool that sends use.
const MaxSettlingReads = 4

type memberKey struct{ conv, user int64 }

// lostDelivery is a delivered watermark written by a flush whose COMMIT's
// answer was lost, and the delivery.updated events it wrote with it.
type lostDelivery struct {
	seq    int64
	events []chat.Event
}

type readWaiter struct {
	seq  int64
	done chan readReply
}

type readReply struct {
	res chat.ReadResult
	err error
}

type pendingRead struct {
	seq     int64 // highest of the waiters
	waiters []readWaiter
}

type receiptMetrics struct {
	flushes *prometheus.CounterVec
	merged  *prometheus.CounterVec
	errors  *prometheus.CounterVec
	batch   *prometheus.HistogramVec
}

var _ chat.ReceiptWriter = (*Receipts)(nil)

// NewReceipts starts the receipt writers on st; stop them with Close.
func NewReceipts(st *Store, cfg ReceiptsConfig) (*Receipts, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4096
	}
	if cfg.DeliveredInterval <= 0 {
		cfg.DeliveredInterval = 250 * time.Millisecond
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = 10 * time.Second
	}
	if cfg.Delivered == nil {
		cfg.Delivered = NewDeliveredBuffer()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Receipts{
		st: st, cfg: cfg, log: cfg.Logger,
		reads: map[memberKey]*pendingRead{}, rwake: make(chan struct{}, 1),
		settling: map[memberKey]bool{}, settleSlots: make(chan struct{}, MaxSettlingReads),
		delivered: cfg.Delivered, lostDelivered: map[memberKey]lostDelivery{},
		stop: make(chan struct{}),
		m: receiptMetrics{
			flushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_receipt_flushes_total",
				Help: "Committed watermark batch transactions, by kind (read, delivered)."}, []string{"kind"}),
			merged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_receipts_merged_total",
				Help: "Receipts merged into one already waiting for the same conversation and user, by kind."}, []string{"kind"}),
			errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_receipt_flush_errors_total",
				Help: "Failed watermark batch transactions, by kind."}, []string{"kind"}),
			batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chat_receipt_batch_size",
				Help:    "(conversation, user) pairs per watermark batch, by kind.",
				Buckets: prometheus.ExponentialBuckets(1, 4, 8)}, []string{"kind"}),
		},
	}
	if err := promreg.Register(cfg.Registerer, r.m.flushes, r.m.merged, r.m.errors, r.m.batch); err != nil {
		return nil, fmt.Errorf("register receipt metrics: %w", err)
	}
	r.wg.Add(1)
	go r.runReads()
	r.dwriter = coalesce.NewWriter(cfg.Delivered.m, coalesce.WriterConfig[memberKey, int64]{
		Flush:    r.flushDelivered,
		Interval: cfg.DeliveredInterval,
		MaxBatch: cfg.MaxBatch,
		Timeout:  cfg.FlushTimeout,
		OnError: func(err error, pairs int) {
			r.m.errors.WithLabelValues("delivered").Inc()
			if !r.failing.Swap(true) {
				r.log.Warn("delivered watermarks: flush failed; retrying", "pairs", pairs, "err", err)
			}
		},
	})
	return r, nil
}

// ReadFlushes is the number of committed read-receipt transactions.
func (r *Receipts) ReadFlushes() int64 { return r.readFlushes.Load() }

// DeliveredFlushes is the number of committed delivered-watermark transactions.
func (r *Receipts) DeliveredFlushes() int64 { return r.deliveredFlushes.Load() }

// MarkRead queues a read receipt and waits until its batch committed.
func (r *Receipts) MarkRead(ctx context.Context, conversationID, userID, seq int64) (chat.ReadResult, error) {
	if seq <= 0 {
		return chat.ReadResult{}, chat.Errorf(chat.CodeInvalid, "seq must be a positive integer")
	}
	w := readWaiter{seq: seq, done: make(chan readReply, 1)}
	k := memberKey{conversationID, userID}
	r.rmu.Lock()
	if r.rclosed {
		r.rmu.Unlock()
		return chat.ReadResult{}, chat.Errorf(chat.CodeUnavailable, "server is shutting down; retry")
	}
	p := r.reads[k]
	if p == nil {
		p = &pendingRead{}
		r.reads[k] = p
	} else {
		r.m.merged.WithLabelValues("read").Inc()
	}
	p.waiters = append(p.waiters, w)
	p.seq = max(p.seq, seq)
	r.rmu.Unlock()
	signal(r.rwake)
	select {
	case rep := <-w.done:
		return rep.res, rep.err
	case <-ctx.Done():
		// The receipt may still commit with its batch: receipts are
		// idempotent, so the caller may simply retry.
		return chat.ReadResult{}, chat.Unavailable("mark read", ctx.Err())
	}
}

// Pending reports whether a read receipt of userID for conversationID is
// waiting for the next batch.
func (r *Receipts) Pending(conversationID, userID int64) bool {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	_, ok := r.reads[memberKey{conversationID, userID}]
	return ok
}

// Delivered records that one of userID's sessions acknowledged message seq
// of conversationID. It never blocks (chat.DeliveredSink).
func (r *Receipts) Delivered(conversationID, userID, seq int64) {
	r.delivered.Delivered(conversationID, userID, seq)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Close refuses new read receipts, commits everything pending and stops the
// writers. It is idempotent.
func (r *Receipts) Close(ctx context.Context) error {
	r.rmu.Lock()
	r.rclosed = true
	r.rmu.Unlock()
	r.stopOnce.Do(func() { close(r.stop) })
	// The two writers stop side by side: a read batch in doubt may keep
	// the read writer past ctx, and the delivered writer's last flush
	// must not wait for it.
	derr := make(chan error, 1)
	go func() { derr <- r.dwriter.Close(ctx) }()
	err := shutdown.Wait(ctx, &r.wg)
	if err != nil {
		err = fmt.Errorf("close receipts: %w", err)
	}
	return errors.Join(err, <-derr)
}

// --- read receipts ---

func (r *Receipts) runReads() {
	defer r.wg.Done()
	for {
		select {
		case <-r.rwake:
			r.drainReads()
		case <-r.stop:
			// Receipts of pairs whose batch is settling are written
			// once it is settled.
			for {
				r.drainReads()
				r.settlers.Wait()
				r.rmu.Lock()
				idle := len(r.reads) == 0
				r.rmu.Unlock()
				if idle {
					return
				}
			}
		}
	}
}

func (r *Receipts) drainReads() {
	for {
		batch := r.takeReads()
		if len(batch) == 0 {
			return
		}
		r.flushReads(batch)
	}
}

func (r *Receipts) takeReads() map[memberKey]*pendingRead {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if len(r.reads) <= r.cfg.MaxBatch && len(r.settling) == 0 {
		b := r.reads
		r.reads = map[memberKey]*pendingRead{}
		return b
	}
	b := make(map[memberKey]*pendingRead, min(len(r.reads), r.cfg.MaxBatch))
	for k, p := range r.reads {
		if len(b) == r.cfg.MaxBatch {
			break
		}
		if r.settling[k] {
			continue
		}
		b[k] = p
		delete(r.reads, k)
	}
	return b
}

// lockMembersSQL locks the member rows of a batch in one order, so two
// batches (of this node or another) never deadlock, and reads their
// watermarks as they are now.
const lockMembersSQL = `
SELECT m.conversation_id, m.user_id, m.last_read_seq, c.last_seq
FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS r(conversation_id, user_id, ord)
CROSS JOIN LATERAL (
  SELECT m.conversation_id, m.user_id, m.last_read_seq FROM conversation_member m
  WHERE m.conversation_id = r.conversation_id AND m.user_id = r.user_id
  LIMIT 1 FOR UPDATE) m
CROSS JOIN LATERAL (SELECT c.last_seq FROM conversation c WHERE c.id = r.conversation_id LIMIT 1) c
ORDER BY r.ord`

// readBatchSQL is markReadSQL for a whole batch: clamp to last_seq, only
// forward; the delivered watermark follows the read one unless the
// reader's read receipts are off.
const readBatchSQL = `
UPDATE conversation_member m
SET last_read_seq = LEAST(r.seq, c.last_seq),
    last_delivered_seq = CASE WHEN ` + readMovesDeliveredSQL + `
                              THEN GREATEST(m.last_delivered_seq, LEAST(r.seq, c.last_seq))
                              ELSE m.last_delivered_seq END
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(conversation_id, user_id, seq)
JOIN conversation c ON c.id = r.conversation_id
WHERE m.conversation_id = r.conversation_id AND m.user_id = r.user_id
  AND LEAST(r.seq, c.last_seq) > m.last_read_seq
RETURNING m.conversation_id, m.user_id, m.last_read_seq, c.last_seq`

const existingConversationsSQL = `SELECT id FROM conversation WHERE id = ANY($1::bigint[])`

type memberState struct{ read, lastSeq int64 }

func sortedKeys[V any](m map[memberKey]V) []memberKey {
	keys := make([]memberKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b memberKey) int {
		if a.conv != b.conv {
			return cmp.Compare(a.conv, b.conv)
		}
		return cmp.Compare(a.user, b.user)
	})
	return keys
}

func (r *Receipts) flushReads(batch map[memberKey]*pendingRead) {
	keys := sortedKeys(batch)
	convs := make([]int64, len(keys))
	users := make([]int64, len(keys))
	seqs := make([]int64, len(keys))
	for i, k := range keys {
		convs[i], users[i], seqs[i] = k.conv, k.user, batch[k].seq
	}
	out := &readOutcome{}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.FlushTimeout)
	err := r.withRetry(ctx, func() error {
		out.reset()
		return r.st.inTxUnsettled(ctx, "mark read", func(tx pgx.Tx) error {
			return markReadsTx(ctx, tx, keys, convs, users, seqs, out)
		}, nil)
	})
	r.m.batch.WithLabelValues("read").Observe(float64(len(keys)))
	var doubt *commitInDoubt
	if !errors.As(err, &doubt) {
		cancel()
		r.answerFlush(batch, keys, out, err)
		return
	}
	// What became of the transaction is asked on a goroutine of its
	// own (pgerr.Committed waits up to 5 s for one in progress), so the
	// other pairs' receipts are written meanwhile. This batch's pairs
	// wait for the answer: a pair's receipts are written, answered and
	// published in order. With MaxSettlingReads such goroutines busy,
	// it is asked here.
	select {
	case r.settleSlots <- struct{}{}:
	default:
		r.settleRead(ctx, doubt, batch, keys, out)
		cancel()
		return
	}
	r.rmu.Lock()
	for _, k := range keys {
		r.settling[k] = true
	}
	r.rmu.Unlock()
	r.settlers.Add(1)
	go func() {
		defer r.settlers.Done()
		if r.settleRead(ctx, doubt, batch, keys, out) != "" {
			r.awaitEnd(doubt.xid)
		}
		cancel()
		r.rmu.Lock()
		for _, k := range keys {
			delete(r.settling, k)
		}
		r.rmu.Unlock()
		<-r.settleSlots
		signal(r.rwake)
	}()
}

// settleRead asks what became of a read batch whose COMMIT is in doubt
// and answers its waiters. It returns the transaction's id when its
// outcome is still not known.
func (r *Receipts) settleRead(ctx context.Context, doubt *commitInDoubt, batch map[memberKey]*pendingRead, keys []memberKey, out *readOutcome) (unknown string) {
	unknown, err := r.st.askOutcome(ctx, doubt)
	if unknown != "" {
		// Answered unavailable, it may have committed all the same:
		// its events are published once that is learnt, as writeTx's
		// are.
		r.st.learnLater(unknown, out.events, nil)
	}
	r.answerFlush(batch, keys, out, err)
	return unknown
}

// maxAwaitEnd bounds how long a read batch in doubt whose outcome was
// not learnt keeps its pairs held (awaitEnd): past it PostgreSQL should
// long have ended an orphaned transaction
// (idle_in_transaction_session_timeout, 10 s on chatd's pools).
const maxAwaitEnd = 30 * time.Second

// awaitEnd waits, up to maxAwaitEnd, until transaction xid is no longer
// in progress. A read batch whose outcome was not learnt in
// pgerr.Committed's wait may still hold its member rows (its connection
// died with the COMMIT unsent, and PostgreSQL has not noticed): a later
// batch with one of its pairs would wait for that row on the read
// writer, every other user's receipts behind it. So its pairs stay held
// until then.
func (r *Receipts) awaitEnd(xid string) {
	deadline := time.Now().Add(maxAwaitEnd)
	for pause := 50 * time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		status, err := pgerr.XactStatus(ctx, r.st.pool, xid)
		cancel()
		if err == nil && status != "in progress" {
			return
		}
		time.Sleep(pause)
	}
}

// answerFlush answers the waiters of a read batch whose transaction
// ended with err, and publishes its events when it committed.
func (r *Receipts) answerFlush(batch map[memberKey]*pendingRead, keys []memberKey, out *readOutcome, err error) {
	if err != nil {
		r.m.errors.WithLabelValues("read").Inc()
		for _, p := range batch {
			for _, w := range p.waiters {
				w.done <- readReply{err: err}
			}
		}
		return
	}
	r.readFlushes.Add(1)
	r.m.flushes.WithLabelValues("read").Inc()
	if len(out.events) > 0 {
		r.st.wakeRelay()
	}
	answerReads(batch, keys, out)
	r.st.publish(out.events...)
}

// readOutcome is what one attempt of a read flush's transaction found:
// the members' states as locked and as updated (a member is in updated
// only when its watermark moved), the conversations that exist, and the
// read events it wrote to the outbox.
type readOutcome struct {
	locked  map[memberKey]memberState
	updated map[memberKey]memberState
	exists  map[int64]bool
	events  []chat.Event
}

// reset empties out for an attempt: a retried transaction must not keep
// what the failed one saw.
func (out *readOutcome) reset() {
	out.locked, out.updated, out.exists = map[memberKey]memberState{}, map[memberKey]memberState{}, map[int64]bool{}
	out.events = out.events[:0]
}

// markReadsTx locks the members of keys, moves their read watermarks to
// seqs in one round trip, and writes a read event to the outbox for every
// watermark that moved, in keys' order.
func markReadsTx(ctx context.Context, tx pgx.Tx, keys []memberKey, convs, users, seqs []int64, out *readOutcome) error {
	b := &pgx.Batch{}
	b.Queue(deferNotifySQL)
	b.Queue(lockMembersSQL, convs, users)
	b.Queue(readBatchSQL, convs, users, seqs)
	b.Queue(existingConversationsSQL, convs)
	b.Queue(hiddenMembersSQL, convs) // read receipt privacy (people.go)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return fmt.Errorf("defer notify: %w", err)
	}
	if err := scanStates(br, out.locked); err != nil {
		_ = br.Close()
		return fmt.Errorf("lock members: %w", err)
	}
	if err := scanStates(br, out.updated); err != nil {
		_ = br.Close()
		return fmt.Errorf("update read watermarks: %w", err)
	}
	rows, err := br.Query()
	if err == nil {
		var ids []int64
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, id := range ids {
			out.exists[id] = true
		}
	}
	var hidden map[int64][]int64
	if err == nil {
		if rows, err = br.Query(); err == nil {
			hidden, err = scanHiddenMembers(rows)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read conversations: %w", err)
	}
	for _, k := range keys {
		if u, ok := out.updated[k]; ok {
			ev := chat.ReadEvent(k.conv, k.user, u.read)
			ev.LastSeq = u.lastSeq
			out.events = append(out.events, ev)
		}
	}
	applyReadPrivacy(out.events, hidden)
	return insertOutbox(ctx, tx, chat.TraceContext{}, out.events...)
}

// answerReads answers every waiter of a committed read flush: not a
// member (or no such conversation), or its own receipt's outcome.
func answerReads(batch map[memberKey]*pendingRead, keys []memberKey, out *readOutcome) {
	for _, k := range keys {
		p := batch[k]
		st, ok := out.locked[k]
		if !ok {
			e := errNotMember(k.conv)
			if !out.exists[k.conv] {
				e = errNoConversation(k.conv)
			}
			for _, w := range p.waiters {
				w.done <- readReply{err: e}
			}
			continue
		}
		last := st.lastSeq
		if u, ok := out.updated[k]; ok {
			last = u.lastSeq
		}
		// Apply the merged receipts one by one in arrival order: the final
		// watermark is what the UPDATE wrote.
		mark := st.read
		for _, w := range p.waiters {
			c := min(w.seq, last)
			adv := c > mark
			if adv {
				mark = c
			}
			w.done <- readReply{res: chat.ReadResult{Advanced: adv, LastReadSeq: mark}}
		}
	}
}

// scanStates reads (conversation, user, watermark, last_seq) rows.
func scanStates(br pgx.BatchResults, into map[memberKey]memberState) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k memberKey
		var s memberState
		if err := rows.Scan(&k.conv, &k.user, &s.read, &s.lastSeq); err != nil {
			return err
		}
		into[k] = s
	}
	return rows.Err()
}

// withRetry runs fn again after a deadlock or serialization failure
// (pgerr.RetryConflicts); both roll the transaction back entirely.
func (r *Receipts) withRetry(ctx context.Context, fn func() error) error {
	return pgerr.RetryConflicts(ctx, fn)
}

// --- delivered watermarks ---

// deliveredPlanSQL reads, without locking, which delivered watermarks a
// batch moves (reading counts as delivered, unless the reader's read
// receipts are off: as the watermarks are shown) and who sent the messages each
// moves over (the last 1000 of them): the users delivery.updated is for. A
// member's own messages do not count. A row that moves over only its own
// messages comes back once with a NULL sender. Each row carries the
// conversation's last_seq, the event's place in its conversation
// (chat.Event.LastSeq): the lookup that clamps the watermark reads it.
const deliveredPlanSQL = `
SELECT r.conversation_id, r.user_id, LEAST(r.seq, c.last_seq), s.sender_id, c.last_seq
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS r(conversation_id, user_id, seq, ord)
CROSS JOIN LATERAL (
  SELECT GREATEST(m.last_delivered_seq, CASE WHEN ` + readMovesDeliveredSQL + ` THEN m.last_read_seq ELSE 0 END) AS cur
  FROM member_watermark m
  WHERE m.conversation_id = r.conversation_id AND m.user_id = r.user_id LIMIT 1) m
CROSS JOIN LATERAL (SELECT c.last_seq FROM conversation c WHERE c.id = r.conversation_id LIMIT 1) c
LEFT JOIN LATERAL (
  SELECT DISTINCT x.sender_id FROM (
    SELECT msg.sender_id FROM message msg
    WHERE msg.conversation_id = r.conversation_id AND msg.kind = 'message'
      AND msg.seq > GREATEST(m.cur, LEAST(r.seq, c.last_seq) - 1000) AND msg.seq <= LEAST(r.seq, c.last_seq)
    LIMIT 1000) x
  WHERE x.sender_id <> r.user_id) s ON true
WHERE LEAST(r.seq, c.last_seq) > m.cur
ORDER BY r.ord, s.sender_id`

// deliveredBatchSQL moves delivered watermarks forward in member_delivery
// (migration 0009), in key order. The seqs come from deliveredPlanSQL,
// already clamped to last_seq (which only grows) and only for members. It
// locks no conversation_member row: group commit holds those.
const deliveredBatchSQL = `
INSERT INTO member_delivery AS d (conversation_id, user_id, delivered_seq)
SELECT r.conversation_id, r.user_id, r.seq
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(conversation_id, user_id, seq)
ORDER BY r.conversation_id, r.user_id
ON CONFLICT (conversation_id, user_id) DO UPDATE SET delivered_seq = EXCLUDED.delivered_seq
WHERE d.delivered_seq < EXCLUDED.delivered_seq`

// flushDelivered writes a batch of delivered watermarks. What moves and the
// delivery.updated events are worked out first, without locks, and the
// transaction is one round trip (outbox rows, the upsert, COMMIT), so the
// member_delivery rows it locks are held briefly.
// A watermark moved concurrently (a read receipt, a send) between the two
// steps only makes an event redundant, never false: the upsert moves rows
// forward only, and after it each row's delivered watermark is at least
// what its event says.
//
// A flush whose COMMIT's answer was lost (errMaybeCommitted) may have
// committed: its outbox rows then reach the other nodes, but this node
// skips its own rows in Kafka, and the write of the same batch again
// finds nothing to move and makes no event. So its watermarks and events
// are kept (lostDelivered), and the next flush first reads those
// watermarks: the events of one that is there are published (should
// another writer have moved it instead, they are still true: the
// watermark is at least what they say). One that is not there is
// covered by the flush that writes its pair again (moved from below it,
// with an event for every sender it moves over).
func (r *Receipts) flushDelivered(ctx context.Context, batch map[memberKey]int64) error {
	if err := r.publishLostDelivered(ctx); err != nil {
		return err
	}
	keys := sortedKeys(batch)
	convs := make([]int64, len(keys))
	users := make([]int64, len(keys))
	seqs := make([]int64, len(keys))
	for i, k := range keys {
		convs[i], users[i], seqs[i] = k.conv, k.user, batch[k]
	}
	// Sized for a row per watermark, as most are: an Event is half a
	// kilobyte, and growing the slice by doubling made as much garbage
	// again as the events themselves.
	events := make([]chat.Event, 0, len(keys))
	mc, mu, ms := make([]int64, 0, len(keys)), make([]int64, 0, len(keys)), make([]int64, 0, len(keys))
	err := r.withRetry(ctx, func() error {
		events, mc, mu, ms = events[:0], mc[:0], mu[:0], ms[:0]
		rows, err := r.st.pool.Query(ctx, deliveredPlanSQL, convs, users, seqs)
		if err != nil {
			return classify("save delivered watermarks", fmt.Errorf("plan: %w", err))
		}
		var last memberKey
		for rows.Next() {
			var k memberKey
			var seq, lastSeq int64
			var sender *int64
			if err := rows.Scan(&k.conv, &k.user, &seq, &sender, &lastSeq); err != nil {
				rows.Close()
				return classify("save delivered watermarks", fmt.Errorf("plan: %w", err))
			}
			if k != last {
				last = k
				mc, mu, ms = append(mc, k.conv), append(mu, k.user), append(ms, seq)
			}
			if sender != nil {
				ev := chat.DeliveryEvent(k.conv, k.user, seq)
				ev.SenderID, ev.LastSeq = *sender, lastSeq
				events = append(events, ev)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return classify("save delivered watermarks", fmt.Errorf("plan: %w", err))
		}
		if len(mc) == 0 {
			return nil // nothing moves
		}
		ob, err := outboxArgs(events)
		if err != nil {
			return err
		}
		return r.st.pipelineTx(ctx, "save delivered watermarks", func(b *pgx.Batch) {
			b.Queue(keyLookupTxSQL)
			if len(events) > 0 {
				b.Queue(insertOutboxSQL, ob.keys, ob.types, ob.payloads, nil, nil)
			}
			b.Queue(deliveredBatchSQL, mc, mu, ms)
		})
	})
	r.m.batch.WithLabelValues("delivered").Observe(float64(len(keys)))
	if err != nil {
		if errors.Is(err, errMaybeCommitted) {
			r.keepLostDelivered(mc, mu, ms, events)
		}
		return err
	}
	for k, seq := range batch {
		if l, ok := r.lostDelivered[k]; ok && seq >= l.seq {
			delete(r.lostDelivered, k)
		}
	}
	r.deliveredFlushes.Add(1)
	r.m.flushes.WithLabelValues("delivered").Inc()
	if r.failing.Swap(false) {
		r.log.Info("delivered watermarks: flushing again")
	}
	r.st.publish(events...)
	return nil
}

// lostDeliveredSQL answers which of the pairs' delivered watermarks are
// at or past the seqs given (as deliveredPlanSQL reads them).
const lostDeliveredSQL = `
SELECT r.conversation_id, r.user_id
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(conversation_id, user_id, seq)
CROSS JOIN LATERAL (
  SELECT GREATEST(m.last_delivered_seq, CASE WHEN ` + readMovesDeliveredSQL + ` THEN m.last_read_seq ELSE 0 END) AS cur
  FROM member_watermark m
  WHERE m.conversation_id = r.conversation_id AND m.user_id = r.user_id LIMIT 1) m
WHERE m.cur >= r.seq`

// keepLostDelivered keeps the watermarks (convs, users, seqs) of a flush
// whose COMMIT's answer was lost, each with its events, replacing what
// an earlier lost flush kept for the same pair: this one planned from
// the watermark as it found it, below the earlier one's, so its events
// cover the earlier ones'.
func (r *Receipts) keepLostDelivered(convs, users, seqs []int64, events []chat.Event) {
	for i := range convs {
		r.lostDelivered[memberKey{convs[i], users[i]}] = lostDelivery{seq: seqs[i]}
	}
	for _, ev := range events {
		k := memberKey{ev.ConversationID, ev.UserID}
		l := r.lostDelivered[k]
		l.events = append(l.events, ev)
		r.lostDelivered[k] = l
	}
}

// publishLostDelivered publishes the events of the lost flushes' watermarks
// that are there now, and forgets them.
func (r *Receipts) publishLostDelivered(ctx context.Context) error {
	if len(r.lostDelivered) == 0 {
		return nil
	}
	keys := sortedKeys(r.lostDelivered)
	convs, users, seqs := make([]int64, len(keys)), make([]int64, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		convs[i], users[i], seqs[i] = k.conv, k.user, r.lostDelivered[k].seq
	}
	rows, err := r.st.pool.Query(ctx, lostDeliveredSQL, convs, users, seqs)
	if err != nil {
		return classify("save delivered watermarks", fmt.Errorf("read the watermarks of a flush whose answer was lost: %w", err))
	}
	there, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (memberKey, error) {
		var k memberKey
		err := row.Scan(&k.conv, &k.user)
		return k, err
	})
	if err != nil {
		return classify("save delivered watermarks", fmt.Errorf("read the watermarks of a flush whose answer was lost: %w", err))
	}
	var evs []chat.Event
	for _, k := range there {
		evs = append(evs, r.lostDelivered[k].events...)
		delete(r.lostDelivered, k)
	}
	r.st.publish(evs...)
	return nil
}
