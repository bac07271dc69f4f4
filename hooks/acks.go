package hooks

import (
	"slices"
	"sync"

	chat "github.com/chatd/chatd"
)

// ackQueue holds one connection's QoS 1 publishes that await their
// answer, in the order they arrived. MQTT requires PUBACKs in that order
// (v5 §4.6), while their commits complete in any order: a publish's answer
// waits until every earlier one has its own, and then they go to the
// connection's delivery session together, in order.
//
// It also bounds the publishes in flight: at most max (the Receive
// Maximum the server announced) may wait at once, and at most max answers
// handed to the session may wait to be written. An answer is out of line
// once it is queued, not once it is written: without the second bound, a
// client that reads nothing of its socket while it publishes (answered at
// once: a topic not allowed, a rate limit) had the server read on and hold
// every PUBACK it could not write, until the write watchdog ended the
// connection.
type ackQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	max    int
	slots  []*ackSlot // in arrival order, the oldest first
	closed bool

	// unwritten holds the packet ids of the answers handed to the
	// session whose write (or failure to write) it has not reported
	// (chat.Ack.Sent), in the order handed: the session reports them in
	// that order. Guarded by wmu, not mu: a session with nothing to write
	// to reports at once, inside complete, which holds mu.
	wmu       sync.Mutex
	wcond     *sync.Cond
	unwritten []uint16
	wclosed   bool
	sent      func(error) // written: the Sent of every answer
}

type ackSlot struct {
	done bool
	ack  chat.Ack
}

func newAckQueue(max int) *ackQueue {
	q := &ackQueue{max: max}
	q.cond = sync.NewCond(&q.mu)
	q.wcond = sync.NewCond(&q.wmu)
	q.sent = q.written // once: a method value per answer would allocate
	return q
}

// written reports the oldest answer unwritten written, or never to be.
func (q *ackQueue) written(error) {
	q.wmu.Lock()
	if len(q.unwritten) == 0 {
		q.wmu.Unlock() // a report with none handed: nothing to take back
		return
	}
	q.unwritten = q.unwritten[1:]
	if len(q.unwritten) == 0 {
		q.unwritten = q.unwritten[:0:0] // the array goes: it only grows otherwise
	}
	q.wmu.Unlock()
	q.wcond.Signal()
}

// awaitWritten waits while max answers wait to be written: the client is
// not read meanwhile, as when max publishes wait for their answers.
func (q *ackQueue) awaitWritten() {
	q.wmu.Lock()
	for len(q.unwritten) >= q.max && !q.wclosed {
		q.wcond.Wait()
	}
	q.wmu.Unlock()
}

// reserve takes the next place in line for the publish with packet id.
// Over the maximum it waits for a place when wait is set (MQTT 3.1.1,
// which has no flow control: the client is simply not read meanwhile) and
// otherwise reports false (v5: the client broke the Receive Maximum).
//
// Either way it first waits while max answers wait to be written.
//
// A retransmission (dup) of a publish whose answer is not written yet,
// still in line or handed to the session, gets no place, and reserve
// returns a nil slot with ok true: that answer is its answer. A second
// PUBACK of the packet id would reach a client that freed the id at the
// first and may have given it to its next publish, which it would then
// acknowledge whatever became of it. Only once the answer is written is
// the retransmission answered as a publish of its own, as MQTT requires
// once the PUBACK is sent (MQTT-4.3.2-2 in 3.1.1: any PUBLISH with the id
// is then a new publication).
func (q *ackQueue) reserve(packetID uint16, wait, dup bool) (*ackSlot, bool) {
	if dup && q.unanswered(packetID) {
		return nil, true
	}
	q.awaitWritten()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.slots) >= q.max && !q.closed {
		if !wait {
			return nil, false
		}
		q.cond.Wait()
	}
	s := &ackSlot{ack: chat.Ack{PacketID: packetID}}
	q.slots = append(q.slots, s)
	return s, true
}

// unanswered reports whether a publish with packetID is in line or its
// answer waits to be written. Both are read under mu, which complete
// holds while it moves answers from the line to the unwritten: a publish
// is always found in one of them until its answer is written.
func (q *ackQueue) unanswered(packetID uint16) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.slots {
		if s.ack.PacketID == packetID {
			return true
		}
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	return slices.Contains(q.unwritten, packetID)
}

// complete gives s its answer and hands every answered publish at the
// head of the line to send, in order, under the queue's lock so that two
// completions never hand theirs over out of order. It returns how many
// publishes left the queue.
func (q *ackQueue) complete(s *ackSlot, a chat.Ack, send func([]chat.Ack)) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	a.PacketID = s.ack.PacketID
	s.ack, s.done = a, true
	n := 0
	for n < len(q.slots) && q.slots[n].done {
		n++
	}
	if n == 0 {
		return 0
	}
	out := make([]chat.Ack, n)
	for i := range out {
		out[i] = q.slots[i].ack
		if traced := out[i].Sent; traced != nil {
			out[i].Sent = func(err error) { traced(err); q.written(err) }
		} else {
			out[i].Sent = q.sent
		}
	}
	clear(q.slots[:n])
	q.slots = q.slots[n:]
	q.wmu.Lock()
	for i := range out {
		q.unwritten = append(q.unwritten, out[i].PacketID)
	}
	q.wmu.Unlock()
	send(out)
	q.cond.Broadcast()
	return n
}

// close releases a read loop waiting for a place: the connection is gone.
func (q *ackQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
	q.wmu.Lock()
	q.wclosed = true
	q.wmu.Unlock()
	q.wcond.Broadcast()
}

// flightLimit bounds one connection's QoS 0 publishes in flight. They have
// no PUBACK, so neither the Receive Maximum nor the ackQueue counts them,
// yet a read receipt or typing indicator holds a goroutine until
// PostgreSQL answered: without a bound, a connection sending them faster
// than the database writes would start goroutines without limit. Over the
// bound the connection's read loop waits, as a 3.1.1 client over the
// Receive Maximum does (QoS 0 has no other flow control).
type flightLimit struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n, max int
	closed bool
}

func newFlightLimit(max int) *flightLimit {
	l := &flightLimit{max: max}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// acquire takes a place, waiting for one; false when the connection ended
// meanwhile.
func (l *flightLimit) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.n >= l.max && !l.closed {
		l.cond.Wait()
	}
	if l.closed {
		return false
	}
	l.n++
	return true
}

// release gives a place back.
func (l *flightLimit) release() {
	l.mu.Lock()
	l.n--
	l.mu.Unlock()
	l.cond.Signal()
}

// close releases a read loop waiting for a place: the connection is gone.
func (l *flightLimit) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cond.Broadcast()
}
