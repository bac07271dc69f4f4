package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tracing"
)

// batchAnswerGrace is how long past a batch's deadline chatd waits for
// PostgreSQL's answer (a cancelled call's error, or a COMMIT that got in
// first) before it gives up on the connection. Only then is an outcome
// unknown, as with any COMMIT lost with its connection.
const batchAnswerGrace = 2 * time.Second

// sendReq is one queued send and, once its batch is done, its outcome.
type sendReq struct {
	// taken is set by flush before it looks at ctx: a caller whose ctx
	// ends after that waits for the real outcome instead of guessing.
	taken atomic.Bool
	ctx   context.Context
	req   chat.Change
	res   chat.ChangeResult
	err   error
	done  func(chat.ChangeResult, error)
	// trace is the caller's trace context (tracing on and the caller
	// traced), written into the change's outbox row and event; span is
	// the change's chat.commit span, nil unless it records.
	trace chat.TraceContext
	span  trace.Span
}

// answer hands the outcome to the caller, after ending the change's span.
func (r *sendReq) answer() {
	if r.span != nil {
		r.endSpan()
	}
	r.done(r.res, r.err)
}

func (r *sendReq) endSpan() {
	if r.err != nil {
		tracing.Fail(r.span, r.err)
	} else {
		r.span.SetAttributes(tracing.AttrSeq.Int64(r.res.Entry.Seq), tracing.AttrDuplicate.Bool(r.res.Duplicate))
	}
	r.span.End()
}

// batcherStuckAfter is how long a transaction may be in flight before the
// next batch starts beside it. Until then sends wait for it and go into
// one batch: each transaction costs PostgreSQL a fixed share (executor
// start-ups, the commit's WAL flush) that a small batch barely spreads
// (measured at 2,000 direct sends/s, 50% more PostgreSQL CPU per message
// with four transactions in flight than with one). A transaction that takes
// longer is waiting for something (a row lock another transaction holds, a
// slow disk) or is part of a load that needs transactions to overlap, one
// committing while the next runs.
const batcherStuckAfter = 10 * time.Millisecond

// maxPendingSends bounds the sends waiting for a batch (besides the intake
// channel's own capacity); beyond it senders block, and so does their
// connection's read loop: back-pressure instead of unbounded memory.
const maxPendingSends = 8192

// batcher gathers sends that arrive while a transaction is in flight and
// commits them together. An idle server commits a lone send at once (a
// batch of one); a busy one commits many per transaction.
//
// One goroutine (run) owns the waiting sends and decides when a batch
// starts: at once when no transaction is in flight; beside the ones in
// flight when the newest of them has run for batcherStuckAfter or a full
// batch is waiting. Up to maxInflight transactions run at a time, each on
// a worker goroutine. A batch takes the waiting sends in arrival order, except
// those of conversations that a batch in flight holds: two concurrent
// batches never want the same conversation row, so they never wait for each
// other's commit, and a conversation's sends commit in arrival order. A
// conversation whose row something else holds stalls only its own sends
// and its batch's neighbours, not the sends that arrive after it.
type batcher struct {
	s        *Store
	intake   chan *sendReq
	maxBatch int
	workers  int
	stop     chan struct{}
	done     chan struct{}
	// wake asks relayWaker for a relay wake-up; one pending request
	// stands for any number of batches.
	wake chan struct{}
	// waiting is how many sends run holds that no batch has taken yet.
	waiting atomic.Int64
}

func newBatcher(s *Store) *batcher {
	return &batcher{s: s, intake: make(chan *sendReq, maxPendingSends), maxBatch: s.maxBatch, workers: max(1, s.maxInflight),
		stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// BatchStats counts batch commits for tests and metrics.
type BatchStats struct {
	Batches  int64 // transactions
	Messages int64 // requests processed
	Queued   int   // waiting for a batch now
}

func (b *batcher) run() {
	defer close(b.done)
	flushed, wakerDone := make(chan struct{}), make(chan struct{})
	go b.relayWaker(flushed, wakerDone)
	defer func() { close(flushed); <-wakerDone }()

	work := make(chan []*sendReq)
	finished := make(chan []int64, b.workers)
	var workers sync.WaitGroup
	for i := 0; i < b.workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			b.flushBatches(work, finished)
		}()
	}
	defer func() { close(work); workers.Wait() }()

	q := batchQueue{held: map[int64]bool{}}
	var stopping bool
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !stopping {
			b.startBatches(&q, work)
		}
		b.waiting.Store(int64(len(q.pending)))
		if stopping && q.inflight == 0 {
			refuseAll(q.pending)
			b.waiting.Store(0)
			return
		}
		var tick <-chan time.Time
		if wait := batcherStuckAfter - time.Since(q.lastStart); q.inflight > 0 && q.inflight < b.workers && len(q.pending) > 0 && wait > 0 {
			timer.Reset(wait)
			tick = timer.C
		}
		var in <-chan *sendReq
		if !stopping && len(q.pending) < maxPendingSends {
			in = b.intake
		}
		select {
		case r := <-in:
			q.pending = b.gather(append(q.pending, r))
		case convs := <-finished:
			q.inflight--
			for _, c := range convs {
				delete(q.held, c)
			}
		case <-tick:
		case <-b.stop:
			stopping = true
		}
		if tick != nil {
			timer.Stop() // Go 1.23+: no stale tick stays in the channel
		}
	}
}

// batchQueue is what run decides with: the sends waiting and the batches
// in flight. Only run's goroutine touches it.
type batchQueue struct {
	pending   []*sendReq
	held      map[int64]bool // conversations of batches in flight
	inflight  int
	lastStart time.Time // when the newest batch in flight started
}

// flushBatches is one worker: it commits the batches run hands it and
// reports each one's conversations back, so run can release them.
func (b *batcher) flushBatches(work <-chan []*sendReq, finished chan<- []int64) {
	for batch := range work {
		// flush compacts batch in place: note what it holds first.
		convs := make([]int64, len(batch))
		for i, r := range batch {
			convs[i] = r.req.ConversationID
		}
		b.flush(batch)
		finished <- convs
	}
}

// startBatches hands waiting sends to free workers while a batch may
// start (see batcher): none in flight, a full batch waiting, or the newest
// in flight stuck for batcherStuckAfter.
func (b *batcher) startBatches(q *batchQueue, work chan<- []*sendReq) {
	for q.inflight < b.workers && len(q.pending) > 0 &&
		(q.inflight == 0 || len(q.pending) >= b.maxBatch || time.Since(q.lastStart) >= batcherStuckAfter) {
		var batch []*sendReq
		batch, q.pending = takeBatch(q.pending, q.held, b.maxBatch)
		if len(batch) == 0 {
			break // all that waits belongs to batches in flight
		}
		for _, r := range batch {
			q.held[r.req.ConversationID] = true
		}
		q.inflight++
		q.lastStart = time.Now()
		work <- batch // a worker is free: inflight was below workers
	}
}

// gather adds to pending what else is already in the intake, up to
// maxPendingSends, without waiting: sends that arrived together go into
// one batch.
func (b *batcher) gather(pending []*sendReq) []*sendReq {
	for len(pending) < maxPendingSends {
		select {
		case r := <-b.intake:
			pending = append(pending, r)
		default:
			return pending
		}
	}
	return pending
}

// refuseAll answers the sends still waiting at shutdown: none of them was
// started, so none is committed.
func refuseAll(pending []*sendReq) {
	for _, r := range pending {
		r.err = errShuttingDown()
		r.answer()
	}
}

// takeBatch splits the waiting changes, in arrival order, into a batch of
// at most limit changes of conversations not held by a batch in flight,
// and the rest. A conversation's changes in one batch are either all
// messages or a single change of another kind, or a single message with
// attachments (chat_send_batch decides each row against the committed
// state, so no row may depend on another row of its batch: two messages
// attaching one upload would). Once a change stays behind, every later
// change of its conversation does too, so order holds.
func takeBatch(pending []*sendReq, held map[int64]bool, limit int) (batch, rest []*sendReq) {
	const (
		messages = 1 // the batch holds messages of the conversation
		closed   = 2 // it holds a change of another kind, or one stayed behind
	)
	state := map[int64]uint8{}
	rest = pending[:0]
	for _, r := range pending {
		c := r.req.ConversationID
		message := r.req.Kind == chat.KindMessage && len(r.req.Attachments) == 0
		take := len(batch) < limit && !held[c] && state[c] != closed && (message || state[c] == 0)
		if !take {
			state[c] = closed
			rest = append(rest, r)
			continue
		}
		state[c] = messages
		if !message {
			state[c] = closed
		}
		batch = append(batch, r)
	}
	clear(pending[len(rest):])
	return batch, rest
}

// relayWaker wakes the outbox relay after batches commit new messages. It
// runs apart from the workers so that neither a sender's PUBACK nor a
// worker's next batch waits for the wake-up's round trip (measured: the
// pipelined pg_notify after COMMIT was part of every lone send's latency),
// and batches that commit while a wake-up is under way share the next one.
// It exits once the workers have (flushed closed), after a last wake-up
// if one is pending.
func (b *batcher) relayWaker(flushed <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-b.wake:
			b.s.wakeRelay()
		case <-flushed:
			select {
			case <-b.wake:
				b.s.wakeRelay()
			default:
			}
			return
		}
	}
}

// errShuttingDown answers sends that group commit will not take any more.
func errShuttingDown() error {
	return chat.Errorf(chat.CodeUnavailable, "server is shutting down; resend")
}

// wakeRelay asks relayWaker for a wake-up without waiting, unless no relay
// needs one (WithRelayWake): then relayWaker is not woken at all.
func (b *batcher) wakeRelay() {
	if !b.s.relayWakeNeeded() {
		return
	}
	select {
	case b.wake <- struct{}{}:
	default: // one is pending already
	}
}

// flush commits a batch and answers its callers. Requests whose caller
// gave up before the batch started are skipped.
func (b *batcher) flush(batch []*sendReq) {
	s := b.s
	live := batch[:0]
	deadline := time.Now().Add(s.batchTimeout)
	for _, r := range batch {
		r.taken.Store(true)
		if err := r.ctx.Err(); err != nil {
			r.err = chat.Unavailable("send", err)
			r.answer()
			continue
		}
		if d, ok := r.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if s.commitAndAnswer(deadline, live) {
		b.wakeRelay()
	}
}

// commitAndAnswer commits reqs in one transaction, publishes what it
// committed and answers every caller; it reports whether any new message
// committed. A failure of the whole transaction other than unavailability
// (a bug or a value PostgreSQL rejects) is retried one request at a time so
// the bad one fails alone.
//
// The batch must not outlive its most impatient caller (deadline): a send
// that was answered "unavailable" must not commit afterwards. PostgreSQL
// enforces the deadline; the grace is for its answer to arrive.
func (s *Store) commitAndAnswer(deadline time.Time, reqs []*sendReq) bool {
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(batchAnswerGrace))
	defer cancel()
	var batch trace.Span
	if s.tracer != nil {
		batch = s.startBatch(reqs)
	}
	err := s.commitBatch(ctx, deadline, reqs)
	s.batchCount.Add(1)
	s.batchMsgs.Add(int64(len(reqs)))
	// The answer to the batch was lost with its connection, COMMIT and
	// all: PostgreSQL may have committed it, and then its messages have
	// seqs and outbox rows but were neither answered nor published. The
	// batch run again on another connection tells (waiting, should the
	// first still hold its locks, up to the same deadline): each change
	// it committed answers a duplicate, with the seq first assigned;
	// what it did not, commits now. Its callers are answered that, and
	// its duplicates are published (publishCommitted). When the re-run
	// fails too, or a batch that is not run again failed on a connection
	// that died without PostgreSQL's word, its changes are remembered
	// (unpublished): a resend of one publishes what it answers.
	lost := errors.As(err, new(lostAnswer))
	if lost {
		for _, r := range reqs {
			r.res, r.err = chat.ChangeResult{}, nil
		}
		err = s.commitBatch(ctx, deadline, reqs)
		s.batchCount.Add(1)
	}
	if batch != nil {
		tracing.Finish(batch, err)
	}
	if err != nil && len(reqs) > 1 && !errors.Is(err, chat.ErrUnavailable) {
		fresh := false
		for _, r := range reqs {
			r.res, r.err = chat.ChangeResult{}, nil
			if e := s.commitBatch(ctx, deadline, []*sendReq{r}); e != nil {
				r.err = e
				if lost || errors.As(e, new(unknownOutcome)) {
					s.unpublished.add([]*sendReq{r})
				}
			} else {
				fresh = s.publishCommitted([]*sendReq{r}, lost) || fresh
			}
			s.batchCount.Add(1)
			r.answer()
		}
		return fresh
	}
	fresh := false
	if err == nil {
		// After a lost answer the relay is owed a wake-up for the rows
		// the lost run wrote, which answer duplicates now.
		fresh = s.publishCommitted(reqs, lost) || lost
	} else if lost || errors.As(err, new(unknownOutcome)) {
		s.unpublished.add(reqs)
	}
	for _, r := range reqs {
		if err != nil {
			r.res, r.err = chat.ChangeResult{}, err
		}
		r.answer()
	}
	return fresh
}

// startBatch starts the span of one group-commit transaction when any of
// its changes is traced (nil otherwise): a root of its own, since it
// serves many traces, linked to each traced change's chat.commit span,
// which links back to it.
func (s *Store) startBatch(reqs []*sendReq) trace.Span {
	var links []trace.Link
	for _, r := range reqs {
		if r.span != nil {
			links = append(links, trace.Link{SpanContext: r.span.SpanContext()})
		}
	}
	if len(links) == 0 {
		return nil
	}
	size := tracing.AttrBatchSize.Int(len(reqs))
	_, span := s.tracer.Start(context.Background(), tracing.SpanBatch, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(size, attribute.String("db.system.name", "postgresql"), attribute.String("db.operation.name", "chat_send_batch")))
	toBatch := trace.Link{SpanContext: span.SpanContext()}
	for _, r := range reqs {
		if r.span != nil {
			r.span.AddLink(toBatch)
			r.span.SetAttributes(size)
		}
	}
	return span
}

// publishCommitted hands the batch's new entries to the publisher in seq
// order per conversation (the batch assigned seqs in its own order), before
// any caller is answered; it reports whether there were any. A resend's
// entry (a duplicate, an already recalled message) is handed on only when
// its first publishing may never have happened: the batch is the re-run
// of one whose answer was lost (again), or the change is one of a batch
// answered with a failure whose outcome was not learnt (unpublished). A
// session that has its seq drops it.
func (s *Store) publishCommitted(batch []*sendReq, again bool) (fresh bool) {
	evs := make([]chat.Event, 0, len(batch))
	for _, r := range batch {
		if r.err != nil || r.res.Entry.Seq == 0 || (r.res.Unchanged && r.res.Entry.Kind != chat.KindRecall) {
			continue
		}
		resend := r.res.Duplicate || r.res.Unchanged
		if resend && !again && !s.unpublished.take(r.req.ConversationID, r.req.ClientMsgID) {
			continue
		}
		ev := chat.EntryEvent(r.res.Entry)
		ev.Trace = r.trace
		evs = append(evs, ev)
		fresh = fresh || !r.res.Duplicate && !r.res.Unchanged
	}
	s.publish(evs...)
	return fresh
}
