package store

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgerr"
	"github.com/chatd/chatd/internal/retry"
)

// outcomes holds the writes (inTx) whose COMMIT lost its answer and whose
// outcome pgerr.Committed could not learn in its wait (PostgreSQL
// unreachable, or the transaction still in progress): they were answered
// unavailable and published nothing, yet may have committed, or may
// still. One goroutine (learn) asks PostgreSQL about them until it knows,
// and publishes the events of those that committed then. Until then the
// conversations whose members they may change stay unsettled for the
// publisher (unsettle, since right before the COMMIT): the fan-out reads their members
// again for each event, so an entry committed after such a removal does
// not reach the removed member's sessions, nor one after such a join miss
// the new member's.
//
// The Kafka consumer cannot do this instead by not skipping the node's
// own rows of such writes: there is none without Kafka, and with it the
// row comes when the relay brings it, not before the entries committed
// after it, which this node publishes at once.
type outcomes struct {
	mu      sync.Mutex
	pending []pendingOutcome
	started bool
	stopped bool
	wake    chan struct{} // a new outcome to learn: ask at once
	stop    context.CancelFunc
	ctx     context.Context // cancelled by stop: learn returns, a question is given up
	done    chan struct{}
}

// pendingOutcome is one write whose outcome is not known.
type pendingOutcome struct {
	xid   string
	evs   []chat.Event
	convs []int64 // told Unsettled
}

// outcomePause bounds the pause between two questions about the pending
// outcomes: the events of a write that committed reach this node's
// sessions within about that of PostgreSQL answering again.
const (
	outcomeMinPause = 50 * time.Millisecond
	outcomeMaxPause = time.Second
)

// maxPendingOutcomes bounds the writes whose outcome is being learnt (and
// the events they hold): past it, one is not taken, its events are not
// published on this node and its conversations stay unsettled, which is
// safe (chat.UnsettledPublisher). Each needs a COMMIT whose answer was
// lost and 5 s of PostgreSQL not answering after it, so reaching it means
// PostgreSQL answers writes but not pg_xact_status.
const maxPendingOutcomes = 4096

// unsettling reports whether ev may change who receives its
// conversation's events, or what of them (history floors).
func unsettling(ev chat.Event) bool {
	switch ev.Type {
	case chat.EventConversationCreated, chat.EventMemberAdded, chat.EventMemberRemoved, chat.EventConversationUpdated:
		return ev.ConversationID != 0
	}
	return false
}

// unsettle tells the publisher that the conversations whose members or
// floors evs may change are unsettled, and returns them: called right
// before the COMMIT of the write that returned evs, for from the moment
// PostgreSQL commits it until its events are published (its answer on
// the way back, or lost, the outcome asked about for seconds, or not
// learnt at all), the entries committed after it would otherwise be
// routed by members as they were before it. Each must be ended by one
// settle, after the write's events were published if it committed.
func (s *Store) unsettle(evs []chat.Event) []int64 {
	u, ok := s.publisher.(chat.UnsettledPublisher)
	if !ok {
		return nil
	}
	var convs []int64
	for _, ev := range evs {
		if unsettling(ev) && !slices.Contains(convs, ev.ConversationID) {
			convs = append(convs, ev.ConversationID)
		}
	}
	if len(convs) > 0 {
		u.Unsettled(convs...)
	}
	return convs
}

// settle ends the unsettle that returned convs.
func (s *Store) settle(convs []int64) {
	if len(convs) > 0 {
		s.publisher.(chat.UnsettledPublisher).Settled(convs...)
	}
}

// learnLater hands the events of the write whose transaction xid's
// outcome is not known to the goroutine that learns it, with the
// conversations unsettle returned for them, which it settles once it
// knows (those of a write learnLater cannot take stay unsettled, the safe
// side).
func (s *Store) learnLater(xid string, evs []chat.Event, convs []int64) {
	if s.publisher == nil || len(evs) == 0 {
		return
	}
	o := &s.outcomes
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	if len(o.pending) >= maxPendingOutcomes {
		slog.Error("outcome of a change not known, and too many are being asked about: its events are not published on this node, and the fan-out reads its conversations' members for each of their events until restarted",
			"xid", xid, "conversations", convs, "pending", len(o.pending))
		return
	}
	o.pending = append(o.pending, pendingOutcome{xid: xid, evs: evs, convs: convs})
	slog.Warn("outcome of a change not known (the answer to its COMMIT was lost); asking PostgreSQL until it is, meanwhile the fan-out reads its conversations' members for each of their events",
		"xid", xid, "conversations", convs, "pending", len(o.pending))
	if !o.started {
		o.started = true
		o.wake, o.done = make(chan struct{}, 1), make(chan struct{})
		o.ctx, o.stop = context.WithCancel(context.Background())
		go func() { defer close(o.done); s.learn() }()
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// learn asks what became of the pending outcomes until none is left,
// then waits for the next; it returns when stopOutcomes cancels ctx.
func (s *Store) learn() {
	o := &s.outcomes
	for attempt := 0; ; {
		var pause <-chan time.Time
		if s.askOutcomes() {
			attempt++
			pause = time.After(retry.Backoff(attempt, outcomeMinPause, outcomeMaxPause))
		} else {
			attempt = 0
		}
		select {
		case <-o.ctx.Done():
			return
		case <-o.wake:
		case <-pause:
		}
	}
}

// askOutcomes asks PostgreSQL about every pending outcome once: a write
// that committed has its events published, then its conversations
// settled; one that did not is settled. It reports whether any is still
// pending.
func (s *Store) askOutcomes() (left bool) {
	o := &s.outcomes
	o.mu.Lock()
	asked := o.pending
	o.pending = nil
	o.mu.Unlock()
	var kept []pendingOutcome
	for _, p := range asked {
		if o.ctx.Err() != nil {
			// Stopping: the rest stays unknown, as stopOutcomes says.
			kept = append(kept, p)
			continue
		}
		ctx, cancel := context.WithTimeout(o.ctx, 2*time.Second)
		status, err := pgerr.XactStatus(ctx, s.pool, p.xid)
		cancel()
		switch {
		case err != nil || status == "in progress":
			kept = append(kept, p)
			continue
		case status == "committed":
			slog.Info("outcome of a change learnt: committed, its events published", "xid", p.xid)
			s.publish(p.evs...)
		case status == "aborted":
			slog.Info("outcome of a change learnt: not committed", "xid", p.xid)
		case status == "":
			// Too old for PostgreSQL to know: the conversations stay
			// unsettled (their members read for each event), which is
			// safe.
			slog.Error("the outcome of a write whose COMMIT lost its answer cannot be learnt; its events are not published on this node",
				"xid", p.xid, "events", len(p.evs))
			continue
		}
		s.settle(p.convs)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(kept, o.pending...)
	return len(o.pending) > 0
}

// stopOutcomes stops learning: what is pending stays unknown on this node
// (other nodes get the events of those that committed from Kafka).
func (s *Store) stopOutcomes(ctx context.Context) error {
	o := &s.outcomes
	o.mu.Lock()
	o.stopped = true
	started := o.started
	o.mu.Unlock()
	if !started {
		return nil
	}
	o.stop()
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
