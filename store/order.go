package store

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// publishOrder hands the events of the writes that one PostgreSQL lock
// serialises (one per key) to the publisher in the order they committed,
// on this node: two writes committing back to back and published by
// their callers' goroutines after their commits would otherwise reach the
// fan-out in whichever order those goroutines ran. A write takes its turn
// (next) while it holds the lock, so its turn comes after those of the
// writes that held it before, which have ended their transactions; once
// its own transaction has ended, committed or not, done waits for the
// turn before it, publishes, and lets the next go. The wait is after the
// commit, with no lock held in PostgreSQL, for writes that have committed
// already: only their publishing (the publisher never blocks).
type publishOrder struct {
	mu    sync.Mutex
	tails map[int64]chan struct{} // per key, closed when its newest turn is done
}

// turn is a write's place in its key's order; nil for a write that took
// none (it failed before its lock, or has nothing to publish).
type turn struct {
	o          *publishOrder
	key        int64
	prev, mine chan struct{}
}

// next takes the next turn of key; the caller holds key's lock in
// PostgreSQL and calls done once its transaction ended.
func (o *publishOrder) next(key int64) *turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tails == nil {
		o.tails = map[int64]chan struct{}{}
	}
	t := &turn{o: o, key: key, prev: o.tails[key], mine: make(chan struct{})}
	o.tails[key] = t.mine
	return t
}

// done runs publish after the turns before t are done, then ends t; a
// nil t just publishes.
func (t *turn) done(publish func()) {
	if t == nil {
		publish()
		return
	}
	if t.prev != nil {
		<-t.prev
	}
	publish()
	close(t.mine)
	t.o.mu.Lock()
	if t.o.tails[t.key] == t.mine {
		delete(t.o.tails, t.key)
	}
	t.o.mu.Unlock()
}

// orderedTx runs fn, a write that publishes in a turn (publishOrder), in
// a READ COMMITTED transaction (inTx), and publishes the events it
// returns once committed, in the turn fn took (*t) while holding its
// lock; a write that took none publishes at once. The turn ends whatever
// becomes of the transaction, a panic included: the writes after it on
// this node wait for it.
func (s *Store) orderedTx(ctx context.Context, op string, fn func(pgx.Tx, **turn) ([]chat.Event, error)) error {
	var (
		t         *turn
		evs       []chat.Event
		convs     []int64 // unsettled at the COMMIT (unsettle)
		committed bool
		learning  bool
	)
	defer func() {
		if !committed {
			evs = nil
		}
		t.done(func() {
			s.publish(evs...)
			if !learning {
				s.settle(convs)
			}
		})
	}()
	unknown, err := s.inTxOutcome(ctx, op, func(tx pgx.Tx) error {
		var err error
		evs, err = fn(tx, &t)
		return err
	}, func() { convs = s.unsettle(evs) })
	committed = err == nil
	if unknown != "" {
		// Published once learnt, after the turns of this node's later
		// writes maybe: the fan-out drops a membership or settings event
		// older than one it routed (delivery's member index).
		learning = true
		s.learnLater(unknown, evs, convs)
	}
	return err
}
