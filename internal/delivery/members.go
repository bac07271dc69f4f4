package delivery

import (
	"container/list"
	"context"
	"slices"
	"time"

	chat "github.com/chatd/chatd"
)

// memberIndex is the fan-out's view of who belongs to which conversation.
// The fan-out goroutine owns it. It is filled on demand by the hub's
// member loaders (never a query on the fan-out goroutine), kept current by
// the membership events the fan-out routes, and bounded: beyond max
// conversations the least recently routed one is forgotten (loaded again
// when it is next needed).
type memberIndex struct {
	max     int
	entries map[int64]*list.Element // of *memberEntry, most recently used at the front
	lru     list.List
	// waiting holds, per conversation whose members are being loaded, the
	// events that arrived meanwhile, in order: they are routed, in that
	// order, once the members are in.
	waiting map[int64][]chat.Event
}

type memberEntry struct {
	conv    int64
	members []int64 // ascending
}

func newMemberIndex(max int) *memberIndex {
	return &memberIndex{max: max, entries: map[int64]*list.Element{}, waiting: map[int64][]chat.Event{}}
}

// get returns the members of conv if they are known.
func (x *memberIndex) get(conv int64) ([]int64, bool) {
	el, ok := x.entries[conv]
	if !ok {
		return nil, false
	}
	x.lru.MoveToFront(el)
	return el.Value.(*memberEntry).members, true
}

// set records conv's members (sorted, owned by the index from now on).
func (x *memberIndex) set(conv int64, members []int64) {
	slices.Sort(members)
	if el, ok := x.entries[conv]; ok {
		el.Value.(*memberEntry).members = members
		x.lru.MoveToFront(el)
		return
	}
	x.entries[conv] = x.lru.PushFront(&memberEntry{conv: conv, members: members})
	for x.lru.Len() > x.max {
		el := x.lru.Back()
		x.lru.Remove(el)
		delete(x.entries, el.Value.(*memberEntry).conv)
	}
}

// forgetAll empties the index (loads in flight and the events waiting for
// them stay).
func (x *memberIndex) forgetAll() {
	clear(x.entries)
	x.lru.Init()
}

// apply updates a known conversation's members for a membership event; a
// conversation not in the index is left to its next load.
func (x *memberIndex) apply(ev chat.Event) {
	switch ev.Type {
	case chat.EventConversationCreated:
		if len(ev.Members) > 0 {
			x.set(ev.ConversationID, slices.Clone(ev.Members))
		}
	case chat.EventMemberAdded:
		if m, ok := x.get(ev.ConversationID); ok {
			if i, found := slices.BinarySearch(m, ev.UserID); !found {
				x.set(ev.ConversationID, slices.Insert(slices.Clone(m), i, ev.UserID))
			}
		}
	case chat.EventMemberRemoved:
		if m, ok := x.get(ev.ConversationID); ok {
			if i, found := slices.BinarySearch(m, ev.UserID); found {
				x.set(ev.ConversationID, slices.Delete(slices.Clone(m), i, i+1))
			}
		}
	}
}

// wait queues ev behind the load of its conversation's members and
// reports whether a load must be started (the first event to wait).
func (x *memberIndex) wait(ev chat.Event) (startLoad bool) {
	q, loading := x.waiting[ev.ConversationID]
	x.waiting[ev.ConversationID] = append(q, ev)
	return !loading
}

// loaded records a finished load and returns the events that waited for
// it, in arrival order.
func (x *memberIndex) loaded(conv int64, members []int64) []chat.Event {
	x.set(conv, members)
	evs := x.waiting[conv]
	delete(x.waiting, conv)
	return evs
}

// failed drops the events that waited for a load that failed; the caller
// makes the sessions catch up from PostgreSQL instead.
func (x *memberIndex) failed(conv int64) int {
	n := len(x.waiting[conv])
	delete(x.waiting, conv)
	return n
}

// memberLoad is the outcome of one load.
type memberLoad struct {
	conv    int64
	members []int64
	err     error
}

// loadMembers runs on a loader goroutine: it reads each requested
// conversation's members and hands them back to the fan-out.
func (h *Hub) loadMembers(requests <-chan int64, results chan<- memberLoad) {
	for {
		select {
		case <-h.ctx.Done():
			return
		case conv := <-requests:
			ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
			m, err := h.store.Members(ctx, conv)
			cancel()
			select {
			case results <- memberLoad{conv: conv, members: m, err: err}:
			case <-h.ctx.Done():
				return
			}
		}
	}
}
