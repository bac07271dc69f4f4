package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	chat "github.com/chatd/chatd"
)

// batchAnswerGrace is how long past a batch's deadline chatd waits for
// PostgreSQL's answer (a cancelled call's error, or a COMMIT that got in
// first) before it gives up on the connection. Only then is an outcome
// unknown, as with any COMMIT lost with its connection.
const batchAnswerGrace = 2 * time.Second

// sendReq is one queued send and, once its batch is done, its outcome.
type sendReq struct {
	// taken is set by the flusher before it looks at ctx: a caller whose
	// ctx ends after that waits for the real outcome instead of guessing.
	taken atomic.Bool
	ctx   context.Context
	req   chat.SendRequest
	res   chat.SendResult
	err   error
	done  chan struct{}
}

// batcher gathers sends that arrive while transactions are in flight and
// commits them together. Flushers take whatever is queued when they become
// free, so an idle server commits a lone send at once (a batch of one) and a
// busy one commits many per transaction.
//
// Each flusher owns the conversations whose id falls in its share (id mod
// flushers) and has a queue of its own: two concurrent batches never want
// the same conversation row, so they never wait for each other's commit
// (measured: with one shared queue most of a batch's time went to lock waits
// on rows another batch held through its fsync). A conversation's sends
// stay in arrival order in one queue.
type batcher struct {
	s        *Store
	queues   []chan *sendReq
	maxBatch int
	stop     chan struct{}
	done     chan struct{}
	// wake asks relayWaker for a relay wake-up; one pending request
	// stands for any number of batches.
	wake chan struct{}
}

func newBatcher(s *Store) *batcher {
	b := &batcher{s: s, maxBatch: s.maxBatch, stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	n := max(1, s.flushers)
	per := max(1024, 8192/n)
	for i := 0; i < n; i++ {
		b.queues = append(b.queues, make(chan *sendReq, per))
	}
	return b
}

func (b *batcher) queueOf(conversationID int64) chan *sendReq {
	i := conversationID % int64(len(b.queues))
	if i < 0 {
		i = -i
	}
	return b.queues[i]
}

// BatchStats counts batch commits for tests and metrics.
type BatchStats struct {
	Batches  int64 // transactions
	Messages int64 // requests processed
	Queued   int   // waiting for a flusher now
}

func (b *batcher) run() {
	defer close(b.done)
	flushed, wakerDone := make(chan struct{}), make(chan struct{})
	go b.relayWaker(flushed, wakerDone)
	defer func() { close(flushed); <-wakerDone }()
	finished := make(chan struct{}, len(b.queues))
	for _, q := range b.queues {
		go func() {
			defer func() { finished <- struct{}{} }()
			batch := make([]*sendReq, 0, b.maxBatch)
			for {
				batch = batch[:0]
				select {
				case r := <-q:
					batch = append(batch, r)
				case <-b.stop:
					return
				}
			gather:
				for len(batch) < b.maxBatch {
					select {
					case r := <-q:
						batch = append(batch, r)
					default:
						break gather
					}
				}
				b.flush(batch)
			}
		}()
	}
	for range b.queues {
		<-finished
	}
}

// relayWaker wakes the outbox relay after batches commit new messages. It
// runs apart from the flushers so that neither a sender's PUBACK nor the
// flusher's next batch waits for the wake-up's round trip (measured: the
// pipelined pg_notify after COMMIT was part of every lone send's latency),
// and batches that commit while a wake-up is under way share the next one.
// It exits once the flushers have (flushed closed), after a last wake-up
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

// wakeRelay asks relayWaker for a wake-up without waiting.
func (b *batcher) wakeRelay() {
	select {
	case b.wake <- struct{}{}:
	default: // one is pending already
	}
}

// flush commits a batch and wakes its callers. Requests whose caller gave up
// before the batch started are skipped. A failure of the whole transaction
// other than unavailability (a bug or a value PostgreSQL rejects) is retried
// one request at a time so the bad one fails alone.
func (b *batcher) flush(batch []*sendReq) {
	s := b.s
	live := batch[:0]
	deadline := time.Now().Add(s.batchTimeout)
	for _, r := range batch {
		r.taken.Store(true)
		if err := r.ctx.Err(); err != nil {
			r.err = chat.Unavailable("send", err)
			close(r.done)
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
	// The batch must not outlive its most impatient caller: a send that
	// was answered "unavailable" must not commit afterwards. PostgreSQL
	// enforces the deadline; the grace is for its answer to arrive.
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(batchAnswerGrace))
	defer cancel()
	err := s.commitBatch(ctx, deadline, live)
	s.batchCount.Add(1)
	s.batchMsgs.Add(int64(len(live)))
	if err != nil && len(live) > 1 && !errors.Is(err, chat.ErrUnavailable) {
		for _, r := range live {
			r.res, r.err = chat.SendResult{}, nil
			if e := s.commitBatch(ctx, deadline, []*sendReq{r}); e != nil {
				r.err = e
			} else if s.onCommit != nil {
				s.notifyCommitted([]*sendReq{r})
			}
			s.batchCount.Add(1)
			close(r.done)
		}
		b.wakeRelay() // no harm if none committed
		return
	}
	if err == nil && s.onCommit != nil {
		s.notifyCommitted(live)
	}
	fresh := false
	for _, r := range live {
		if err != nil {
			r.res, r.err = chat.SendResult{}, err
		}
		fresh = fresh || (r.err == nil && !r.res.Duplicate)
		close(r.done)
	}
	if fresh {
		b.wakeRelay()
	}
}

// notifyCommitted hands the batch's new messages to the commit hook in seq
// order per conversation (the batch assigned seqs in its own order).
func (s *Store) notifyCommitted(batch []*sendReq) {
	for _, r := range batch {
		if r.err == nil && !r.res.Duplicate {
			s.onCommit(chat.MessageEvent(r.res.Message))
			r.res.Notified = true
		}
	}
}
