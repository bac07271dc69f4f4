package store

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tracing"
)

// Send commits one message and waits for its outcome (Change).
func (s *Store) Send(ctx context.Context, req chat.SendRequest) (chat.SendResult, error) {
	res, err := s.Change(ctx, req.Change())
	return chat.SendResult{Message: res.Entry, Duplicate: res.Duplicate}, err
}

// SubmitSend queues a message (SubmitChange).
func (s *Store) SubmitSend(ctx context.Context, req chat.SendRequest, done func(chat.SendResult, error)) {
	s.SubmitChange(ctx, req.Change(), func(res chat.ChangeResult, err error) {
		done(chat.SendResult{Message: res.Entry, Duplicate: res.Duplicate}, err)
	})
}

// Change commits one change of a conversation's stream and waits for its
// outcome. It is SubmitChange with a caller that waits: a caller whose ctx
// ends before a batch takes its change is answered unavailable and the
// change is skipped; once taken, it waits for the batch's real outcome
// (the batch ends by the caller's deadline), so a change answered
// unavailable never commits later.
func (s *Store) Change(ctx context.Context, c chat.Change) (chat.ChangeResult, error) {
	done := make(chan struct{})
	var (
		res chat.ChangeResult
		err error
	)
	r := s.submit(ctx, c, func(cr chat.ChangeResult, e error) { res, err = cr, e; close(done) })
	select {
	case <-done:
		return res, err
	case <-ctx.Done():
		if r == nil || r.taken.Load() {
			// Its transaction is running under this ctx's deadline: the
			// outcome is moments away and must be reported as it is.
			<-done
			return res, err
		}
		return chat.ChangeResult{}, chat.Unavailable("send", ctx.Err())
	}
}

// SubmitChange queues a change and returns at once; done is called exactly
// once, from another goroutine, with the outcome, after the commit (and
// after the committed entry was published). Changes submitted one after
// another commit in that order within their conversation. done must not
// block.
//
// Submitting blocks only while group commit already holds its maximum of
// waiting changes: back-pressure, never unbounded memory.
func (s *Store) SubmitChange(ctx context.Context, c chat.Change, done func(chat.ChangeResult, error)) {
	s.submit(ctx, c, done)
}

// submit validates and queues a change; the returned request is nil when it
// was answered at once (invalid, shutting down, ctx ended while queueing).
func (s *Store) submit(ctx context.Context, c chat.Change, done func(chat.ChangeResult, error)) *sendReq {
	// The Service validated already; validating again keeps a direct caller
	// (or a malformed UUID) from reaching PostgreSQL as a 500.
	if err := s.limits.ValidateChange(&c); err != nil {
		done(chat.ChangeResult{}, err)
		return nil
	}
	r := &sendReq{ctx: ctx, req: c, done: done}
	if s.tracer != nil {
		s.traceSubmit(r)
	}
	if !s.batching {
		// One transaction per send, committed on the caller's goroutine:
		// the same function and outcomes as a batch.
		r.taken.Store(true)
		s.commitNow([]*sendReq{r})
		return r
	}
	b := s.batcher()
	if b == nil {
		done(chat.ChangeResult{}, errShuttingDown())
		return nil
	}
	select {
	case b.intake <- r:
		return r
	case <-ctx.Done():
		done(chat.ChangeResult{}, chat.Unavailable("send", ctx.Err()))
		return nil
	}
}

// traceSubmit takes the caller's trace context for the change's outbox
// row and event and, when the caller's span records, starts the change's
// chat.commit span: from now, queued, until it is answered.
func (s *Store) traceSubmit(r *sendReq) {
	if r.trace = tracing.Inject(r.ctx); r.trace.Parent == "" || !trace.SpanFromContext(r.ctx).IsRecording() {
		return
	}
	_, r.span = s.tracer.Start(r.ctx, tracing.SpanCommit)
}

// batcher starts group commit on first use; nil once the Store is closed.
func (s *Store) batcher() *batcher {
	if s.closed.Load() {
		return nil
	}
	s.batchOnce.Do(func() {
		b := newBatcher(s)
		s.batch.Store(b)
		go b.run()
	})
	return s.batch.Load()
}

// commitNow commits reqs as one batch on the calling goroutine and answers
// each: the path of a Store without group commit.
func (s *Store) commitNow(reqs []*sendReq) {
	deadline := time.Now().Add(s.batchTimeout)
	for _, r := range reqs {
		if d, ok := r.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
	}
	if s.commitAndAnswer(deadline, reqs) {
		s.wakeRelay()
	}
}
