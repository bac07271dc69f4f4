package hooks

import (
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
// Maximum the server announced) may wait at once.
type ackQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	max    int
	slots  []*ackSlot // in arrival order, the oldest first
	closed bool
}

type ackSlot struct {
	done bool
	ack  chat.Ack
}

func newAckQueue(max int) *ackQueue {
	q := &ackQueue{max: max}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// reserve takes the next place in line for the publish with packet id.
// Over the maximum it waits for a place when wait is set (MQTT 3.1.1,
// which has no flow control: the client is simply not read meanwhile) and
// otherwise reports false (v5: the client broke the Receive Maximum).
func (q *ackQueue) reserve(packetID uint16, wait bool) (*ackSlot, bool) {
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
	}
	clear(q.slots[:n])
	q.slots = q.slots[n:]
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
