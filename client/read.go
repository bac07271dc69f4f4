package client

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// readBatcher debounces read receipts: MarkRead records the highest seq per
// conversation, and one publish per conversation goes out when the
// debounce interval after the first unsent receipt has passed, on Flush,
// or after a reconnect for receipts a dropped connection did not take.
type readBatcher struct {
	c        *Client
	debounce time.Duration

	mu      sync.Mutex
	pending map[int64]int64
	timer   *time.Timer
	kickCh  chan struct{}
	// flushing holds a token while a publishing round runs (one at a
	// time); waiting for it honours the caller's context.
	flushing chan struct{}
}

func newReadBatcher(c *Client, debounce time.Duration) *readBatcher {
	return &readBatcher{c: c, debounce: debounce, pending: map[int64]int64{}, kickCh: make(chan struct{}, 1),
		flushing: make(chan struct{}, 1)}
}

// MarkRead records that the user has read conversationID up to seq. The
// receipt is published after Config.ReadDebounce (default 1s) together
// with any others, keeping only the highest seq per conversation; Flush
// publishes at once. It returns an error only when the client is closed.
// The watermark never moves backwards, so a lower seq is harmless.
func (c *Client) MarkRead(_ context.Context, conversationID, seq int64) error {
	if conversationID <= 0 || seq <= 0 {
		return &Error{Op: "read", Code: "invalid", Message: "conversation id and seq must be positive"}
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	r := c.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq > r.pending[conversationID] {
		r.pending[conversationID] = seq
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(r.debounce, r.kick)
	}
	return nil
}

// Flush publishes the pending read receipts now and waits for their
// PUBACKs (or ctx). A receipt chatd refuses for now (rate limited, or
// unavailable) is kept and published again once its retryAfter has
// passed; Flush returns that refusal (an *Error with RetryAfter).
func (c *Client) Flush(ctx context.Context) error {
	return c.reads.publish(ctx)
}

func (r *readBatcher) kick() {
	select {
	case r.kickCh <- struct{}{}:
	default:
	}
}

// run publishes on every kick until the client closes.
func (r *readBatcher) run() {
	for {
		select {
		case <-r.kickCh:
			ctx, cancel := context.WithTimeout(r.c.life, r.c.cfg.RequestTimeout)
			if err := r.publish(ctx); err != nil && !errors.Is(err, ErrClosed) && r.c.life.Err() == nil {
				r.c.cfg.Logger.Debug("read receipts not published yet; retrying after reconnect", "err", err)
			}
			cancel()
		case <-r.c.life.Done():
			return
		}
	}
}

// publish sends every pending receipt; those that fail for lack of a
// connection are put back (keeping the higher seq) for the next round.
func (r *readBatcher) publish(ctx context.Context) error {
	select {
	case r.flushing <- struct{}{}:
	case <-ctx.Done():
		// A round still waits for its PUBACKs (a stalled connection):
		// what it took is put back if it fails.
		return r.c.waitErr("read", ctx.Err())
	}
	defer func() { <-r.flushing }()
	r.mu.Lock()
	batch := r.pending
	r.pending = map[int64]int64{}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.mu.Unlock()
	var firstErr error
	for conv, seq := range batch {
		err := r.publishOne(ctx, conv, seq)
		if err == nil {
			continue
		}
		if r.final(err) {
			r.c.cfg.Logger.Info("read receipt refused", "conversation", conv, "seq", seq, "err", err)
			continue
		}
		r.mu.Lock()
		if seq > r.pending[conv] {
			r.pending[conv] = seq
		}
		if r.c.life.Err() == nil {
			// Not sooner than chatd said: a round before then is
			// refused again.
			wait := toldWait(r.debounce, toldBy(err))
			if r.timer == nil {
				r.timer = time.AfterFunc(wait, r.kick)
			} else if toldBy(err) > 0 {
				r.timer.Reset(wait)
			}
		}
		r.mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// final reports whether a receipt that failed with err is dropped: chatd
// refused it for good (its PUBACK: publishOne returns that *Error as it
// is; a rate limit is no refusal for good, it says when to come back),
// or refused the client's static token, so that no connection will come. A
// wait for a connection that ended is no refusal, even when the error
// wraps the last connection attempt's (a TokenFunc's token refused, which
// the next attempt may replace): the receipt waits for the next round.
func (r *readBatcher) final(err error) bool {
	if e, ok := err.(*Error); ok {
		return !retryable(e) && !errors.Is(e, ErrRateLimited)
	}
	return r.c.Err() != nil
}

func (r *readBatcher) publishOne(ctx context.Context, conv, seq int64) error {
	cs, err := r.c.ready(ctx)
	if err != nil {
		return r.c.waitErr("read", err)
	}
	payload, _ := json.Marshal(struct {
		Seq int64 `json:"seq"`
	}{seq})
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(cs.ctx, cancel)
	defer stop()
	resp, err := cs.cm.Publish(actx, &paho.Publish{QoS: 1, Topic: "chat/v1/conv/" + strconv.FormatInt(conv, 10) + "/read", Payload: payload})
	if resp != nil {
		if resp.ReasonCode >= 0x80 {
			return publishError("read", resp)
		}
		r.c.stats.reads.Add(1)
		return nil
	}
	if err == nil {
		err = errors.New("no PUBACK")
	}
	return r.c.waitErr("read", err)
}
