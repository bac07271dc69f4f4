package delivery

import (
	"container/list"
	"context"
	"slices"
	"time"

	chat "github.com/chatd/chatd"
)

// memberIndex is the fan-out's view of who belongs to which conversation,
// with each member's history floor (what live delivery hides from them).
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
	// epoch counts the times the index was emptied (forgetAll): a load
	// handed to a loader before the last time may have read the members
	// before a change whose event was dropped, and is read again.
	epoch uint64
	// kept holds the membership seqs (memberEntry.seqs) of conversations
	// forgotten to be read again (forget), for the entry their next load
	// makes: a late membership event is still late after a reload. At
	// most max of them.
	kept map[int64]map[int64]int64
}

type memberEntry struct {
	conv int64
	r    chat.Routing
	// seqs holds, per user, the seq of the last membership event applied
	// to them: one older than it (or than r.Seq, the load's) arrived late
	// and is already in r. Under stateKey's keys it holds the seq of the
	// last conversation.updated and of each member's last member.updated.
	seqs map[int64]int64
}

// note records a membership event of user at seq. It reports whether the
// event is late (older than one of theirs the index saw: every session
// got that one) and whether it is in r already (late, or older than the
// load, which read it; one at the load's seq came after it).
func (e *memberEntry) note(user, seq int64) (late, known bool) {
	last := e.seqs[user]
	if seq > last {
		if e.seqs == nil {
			e.seqs = map[int64]int64{}
		}
		e.seqs[user] = seq
	}
	return seq < last, seq < max(e.r.Seq, last)
}

func newMemberIndex(max int) *memberIndex {
	return &memberIndex{max: max, entries: map[int64]*list.Element{}, waiting: map[int64][]chat.Event{}, kept: map[int64]map[int64]int64{}}
}

// get returns the members of conv if they are known.
func (x *memberIndex) get(conv int64) (chat.Routing, bool) {
	el, ok := x.entries[conv]
	if !ok {
		return chat.Routing{}, false
	}
	x.lru.MoveToFront(el)
	return el.Value.(*memberEntry).r, true
}

// set records conv's members (ascending, owned by the index from now on).
func (x *memberIndex) set(conv int64, r chat.Routing) {
	if el, ok := x.entries[conv]; ok {
		el.Value.(*memberEntry).r = r
		x.lru.MoveToFront(el)
		return
	}
	x.entries[conv] = x.lru.PushFront(&memberEntry{conv: conv, r: r})
	for x.lru.Len() > x.max {
		el := x.lru.Back()
		x.lru.Remove(el)
		delete(x.entries, el.Value.(*memberEntry).conv)
	}
}

// forget drops what the index knows of conv (loads in flight and the
// events waiting for them stay), but for the seqs of its membership events,
// which its next load gets (loaded).
func (x *memberIndex) forget(conv int64) {
	if el, ok := x.entries[conv]; ok {
		if seqs := el.Value.(*memberEntry).seqs; seqs != nil && len(x.kept) < x.max {
			x.kept[conv] = seqs
		}
		x.lru.Remove(el)
		delete(x.entries, conv)
	}
}

// refresh forgets conv's members when ev changes history floors in a way
// it does not say, so that ev waits for a load that reads them as they
// are: a join (the new member's floor depends on the group's history
// visibility, which member.added does not carry) and a change of the
// group's settings (which may change that visibility, and so every
// member's floor). Only for an event as it arrives: the events that
// waited for a load are applied to what it read (apply).
func (x *memberIndex) refresh(ev chat.Event) {
	switch ev.Type {
	case chat.EventMemberAdded, chat.EventConversationUpdated:
		x.forget(ev.ConversationID)
	}
}

// forgetAll empties the index (loads in flight and the events waiting for
// them stay).
func (x *memberIndex) forgetAll() {
	clear(x.entries)
	x.lru.Init()
	x.epoch++
}

// apply updates a known conversation's members for a membership event; a
// conversation not in the index is left to its next load. An event older
// than what the index holds of its member changes nothing, and one older
// than a membership event of theirs it saw is late (a relay leader's batch
// landing after its successor's, Kafka redelivering, another node's event
// overtaken by this node's own): apply reports it, and it is not routed,
// for it would tell the sessions and clients of a membership that ended.
// A conversation.updated or member.updated older than the last of its
// state the index saw is late too (stateKey).
func (x *memberIndex) apply(ev chat.Event) (late bool) {
	var e *memberEntry
	if el, ok := x.entries[ev.ConversationID]; ok {
		e = el.Value.(*memberEntry)
	}
	switch ev.Type {
	case chat.EventConversationCreated:
		// Members the index holds hold the creation: unlike a join, it
		// writes no entry, and what was read or routed came after it.
		// Arriving again (Kafka redelivering) it would bring back a
		// member removed before the first entry (at seq 0 too).
		if len(ev.Members) > 0 && e == nil {
			// The first members joined before any entry: no floor.
			m := slices.Clone(ev.Members)
			slices.Sort(m)
			x.set(ev.ConversationID, chat.Routing{Members: m, Seq: ev.Seq})
		}
	case chat.EventMemberAdded, chat.EventMemberRemoved:
		// A member.added of a member the index lacks comes only from a
		// join that waited for a load (refresh forgets the conversation
		// at a join that arrives) and that the load did not see: it read
		// the members before the join committed, or after the member
		// left again. The join's seq is their floor if the group's
		// history is "joined"; otherwise it is the safe side: an edit of
		// a message from before the join reaches them without its body
		// until the conversation is loaded again.
		if e == nil {
			return false
		}
		late, known := e.note(ev.UserID, ev.Seq)
		if known {
			return late
		}
		if r, ok := x.get(ev.ConversationID); ok {
			if r, changed := withMembership(r, ev); changed {
				x.set(ev.ConversationID, r)
			}
		}
	case chat.EventConversationUpdated, chat.EventMemberUpdated:
		// A state, each event the whole of it as of its seq (the group's
		// settings; a member's role), which clients apply as it comes:
		// one older than one the index saw would undo the newer (another
		// node's change, relayed late, overtaken by this node's own
		// newer one, or Kafka redelivering). The index holds neither, so
		// none is "known"; the event it arrives with is routed.
		if e == nil {
			return false
		}
		late, _ := e.note(stateKey(ev), ev.Seq)
		return late
	}
	return false
}

// withMembership is r with ev's member added (member.added, their floor
// ev.Seq) or removed (member.removed), and whether that changed r: not
// for a member it has already, or lacks already.
func withMembership(r chat.Routing, ev chat.Event) (chat.Routing, bool) {
	i, found := slices.BinarySearch(r.Members, ev.UserID)
	switch {
	case ev.Type == chat.EventMemberAdded && !found:
		if r.Floors == nil && ev.Seq > 0 {
			r.Floors = make([]int64, len(r.Members))
		}
		r.Members = slices.Insert(slices.Clone(r.Members), i, ev.UserID)
		if r.Floors != nil {
			r.Floors = slices.Insert(slices.Clone(r.Floors), i, ev.Seq)
		}
		return r, true
	case ev.Type == chat.EventMemberRemoved && found:
		r.Members = slices.Delete(slices.Clone(r.Members), i, i+1)
		if r.Floors != nil {
			r.Floors = slices.Delete(slices.Clone(r.Floors), i, i+1)
		}
		return r, true
	}
	return r, false
}

// stateKey is memberEntry.seqs' key of the state a state event sets,
// apart from every membership's (user ids are positive): 0 the group's
// settings (conversation.updated), -u user u's role (member.updated).
func stateKey(ev chat.Event) int64 {
	if ev.Type == chat.EventConversationUpdated {
		return 0
	}
	return -ev.UserID
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
func (x *memberIndex) loaded(conv int64, r chat.Routing) []chat.Event {
	x.set(conv, r)
	if seqs, ok := x.kept[conv]; ok {
		delete(x.kept, conv)
		if el, ok := x.entries[conv]; ok {
			e := el.Value.(*memberEntry)
			for u, seq := range seqs {
				e.note(u, seq)
			}
		}
	}
	evs := x.waiting[conv]
	delete(x.waiting, conv)
	return evs
}

// failed drops the events that waited for a load that failed; the caller
// makes the sessions catch up from PostgreSQL instead.
func (x *memberIndex) failed(conv int64) int {
	n := len(x.waiting[conv])
	delete(x.waiting, conv)
	delete(x.kept, conv)
	return n
}

// memberRequest asks a loader for the members of conv; epoch is the
// index's when the load was handed over, waited how many of conv's events
// waited for it then (those that arrived later may have committed after
// it read).
type memberRequest struct {
	conv   int64
	epoch  uint64
	waited int
}

// memberLoad is the outcome of one load.
type memberLoad struct {
	memberRequest
	members chat.Routing
	err     error
}

// loadMembers runs on a loader goroutine: it reads each requested
// conversation's members and hands them back to the fan-out.
func (h *Hub) loadMembers(requests <-chan memberRequest, results chan<- memberLoad) {
	for {
		select {
		case <-h.ctx.Done():
			return
		case req := <-requests:
			ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
			m, err := h.store.Members(ctx, req.conv)
			cancel()
			select {
			case results <- memberLoad{memberRequest: req, members: m, err: err}:
			case <-h.ctx.Done():
				return
			}
		}
	}
}
