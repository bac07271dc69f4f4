package delivery

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tracing"
)

// fanout is the single goroutine that routes events. It owns the member
// index and never waits for PostgreSQL: an event of a conversation whose
// members it does not know waits (with the later events of that
// conversation, in order) while a member loader reads them. After the
// queue overflowed (events were dropped) every session resyncs from
// PostgreSQL: at the next event, or within a second if none comes.
func (h *Hub) fanout() {
	requests := make(chan memberRequest)
	results := make(chan memberLoad)
	var loaders sync.WaitGroup
	for range memberLoaders {
		loaders.Go(func() { h.loadMembers(requests, results) })
	}
	defer loaders.Wait()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var toLoad []int64
	for {
		var req chan memberRequest
		var next memberRequest
		if len(toLoad) > 0 {
			req, next = requests, memberRequest{conv: toLoad[0], epoch: h.members.epoch, waited: len(h.members.waiting[toLoad[0]])}
		}
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
			if h.overflow.Swap(false) {
				h.overflowed()
			}
		case ev := <-h.events:
			if h.overflow.Swap(false) {
				h.overflowed()
			}
			if h.dispatch(ev) {
				toLoad = append(toLoad, ev.ConversationID)
			}
		case req <- next:
			toLoad = toLoad[1:]
		case r := <-results:
			if h.membersLoaded(r) {
				toLoad = append(toLoad, r.conv)
			}
		}
	}
}

// dispatch routes ev if its conversation's members are known, else queues
// it behind their load; it reports whether a load must be requested.
func (h *Hub) dispatch(ev chat.Event) (load bool) {
	if ev.ConversationID == 0 {
		if len(ev.To) > 0 {
			h.toUsers(ev.To, ev)
		}
		return false
	}
	if _, loading := h.members.waiting[ev.ConversationID]; loading {
		h.members.wait(ev)
		return false
	}
	if ev.Type == eventSettled {
		// Every event published before it was routed.
		h.settle(ev.ConversationID)
		return false
	}
	if h.isUnsettled(ev.ConversationID) {
		// A change of the members whose outcome is not known may have
		// committed since they were read: read them after ev's commit.
		h.members.forget(ev.ConversationID)
	}
	h.members.refresh(ev)
	if h.members.apply(ev) {
		return false
	}
	members, ok := h.members.get(ev.ConversationID)
	if !ok {
		return h.members.wait(ev)
	}
	h.route(ev, members)
	return false
}

// membersLoaded routes the events that waited for a conversation's
// members, in order; if the load failed they are dropped and every session
// catches up from PostgreSQL, which has them. It reports whether the
// members must be read again, the events still waiting: the load was
// handed over before an overflow (which may have dropped a change of the
// members it read), or a settings change among the events came after the
// floors it read, perhaps (they may all differ now, see refresh).
func (h *Hub) membersLoaded(r memberLoad) (again bool) {
	if r.err != nil {
		for _, ev := range h.members.waiting[r.conv] {
			if ev.Type == eventSettled {
				h.settle(r.conv)
			}
		}
		n := h.members.failed(r.conv)
		h.opts.Logger.Warn("load members for fan-out failed; sessions will catch up", "conversation", r.conv, "events", n, "err", r.err)
		h.resyncAll()
		return false
	}
	if r.epoch != h.members.epoch {
		return true
	}
	evs := h.members.loaded(r.conv, r.members)
	for i, ev := range evs {
		if i == r.waited && h.isUnsettled(r.conv) {
			// These arrived after the load was handed over, so their
			// commits may be later than what it read, and a change of
			// the members whose outcome is not known may have committed
			// in between (Unsettled): they wait for a read of their own.
			h.members.forget(r.conv)
			for _, ev := range evs[i:] {
				again = h.members.wait(ev) || again
			}
			return again
		}
		if ev.Type == eventSettled {
			h.settle(r.conv)
			continue
		}
		if h.members.apply(ev) {
			continue
		}
		members, _ := h.members.get(ev.ConversationID)
		h.route(ev, members)
		if ev.Type == chat.EventConversationUpdated {
			h.members.forget(r.conv)
			for _, ev := range evs[i+1:] {
				again = h.members.wait(ev) || again
			}
			return again
		}
	}
	return false
}

// overflowed recovers from events the queue dropped: membership changes
// among them would leave the member index wrong for good, so it is
// emptied (each conversation's members are read again when next routed),
// and every session re-reads its positions.
func (h *Hub) overflowed() {
	h.members.forgetAll()
	h.resyncAll()
}

func (h *Hub) resyncAll() {
	for _, s := range h.allSessions() {
		s.resyncUnseen()
	}
}

// route hands ev to the sessions of the users it is for; a traced event's
// routing is a span of its write's trace.
func (h *Hub) route(ev chat.Event, members chat.Routing) {
	if ev.Trace.Parent == "" || h.opts.Tracer == nil {
		h.routeTo(ev, members)
		return
	}
	_, span := h.opts.Tracer.Start(tracing.Extract(context.Background(), ev.Trace), tracing.SpanFanout,
		trace.WithAttributes(tracing.AttrConversation.Int64(ev.ConversationID), tracing.AttrEventType.String(ev.Type),
			tracing.AttrSeq.Int64(ev.Seq), tracing.AttrMembers.Int(len(members.Members))))
	span.SetAttributes(tracing.AttrSessions.Int(h.routeTo(ev, members)))
	span.End()
}

// routeTo hands ev to the sessions of the users it is for and returns how
// many sessions it was offered to.
func (h *Hub) routeTo(ev chat.Event, r chat.Routing) int {
	members := r.Members
	large := len(members) > h.opts.LargeGroup
	seq := ev.Seq
	switch {
	case ev.Type == chat.EventTyping:
		ev.Seq = 0 // for the sessions (Session.accept), not for clients
	case ev.LastSeq > 0:
		// A watermark event's position (Session.admit): past its watermark.
		seq, ev.LastSeq = max(seq, ev.LastSeq), 0 // for the sessions, not for clients
	}
	payload, err := h.encode(ev, large)
	if err != nil {
		return 0
	}
	it := item{kind: kEvent, conv: ev.ConversationID, seq: seq, payload: payload, qos: 1}
	if ev.IsEntry() {
		// Every entry (message, edit, recall, reaction) fills its seq's
		// slot in each member's stream.
		it.kind, it.writer = kMsg, ev.Writer()
		if ev.CreatedAt != nil {
			it.at = *ev.CreatedAt
		}
		if ev.Type == chat.EventMessageRecalled {
			// The cache holds the recalled message (and its edits) with
			// their bodies: catch-up must read them as they are now.
			h.recent.forget(ev.ConversationID)
		}
		// Into the recent cache before any session sees it: a session
		// that drops it (while behind) finds it there when it catches up.
		var editOf int64
		if ev.Type == chat.EventMessageEdited {
			editOf = ev.TargetSeq
		}
		h.recent.put(ev.ConversationID, ev.Seq, recentEntry{payload: payload, large: large, at: it.at, editOf: editOf, writer: it.writer})
		if ev.Type == chat.EventMessageEdited {
			return h.routeEdit(ev, r, large, it)
		}
		return h.toMembers(members, 0, it)
	}
	switch ev.Type {
	case chat.EventTyping:
		it.kind, it.qos = kTyping, 0
		return h.toMembers(members, ev.UserID, it)
	case chat.EventDeliveryUpdated:
		return h.routeDelivered(ev, members, large, it)
	case chat.EventReadUpdated:
		return h.routeRead(ev, members, large, it)
	case chat.EventConversationCreated:
		// Each member's join and its event in one offer (Session.offer).
		n := 0
		for _, u := range members {
			n += h.toSessions(u, item{kind: kJoin, conv: ev.ConversationID, seq: ev.Seq}, it)
		}
		return n
	case chat.EventMemberAdded:
		join := item{kind: kJoin, conv: ev.ConversationID, seq: ev.Seq}
		if _, ok := slices.BinarySearch(members, ev.UserID); !ok {
			h.toSessions(ev.UserID, join)
			return h.toMembers(members, ev.UserID, it)
		}
		own := it
		own.join = true // theirs, at the seq of their join (ofJoin)
		return h.toSessions(ev.UserID, join, own) + h.toMembers(members, ev.UserID, it)
	case chat.EventMemberRemoved:
		// The index no longer lists the removed user: they get the event
		// on their own, after their sessions stop tracking the
		// conversation (in the same offer, so that nothing the leave
		// still owes them goes before it), and whatever else their queue
		// holds.
		notice := it
		notice.kind = kNotice
		leave := item{kind: kLeave, conv: ev.ConversationID, seq: ev.Seq}
		return h.toSessions(ev.UserID, leave, notice) + h.toMembers(members, ev.UserID, it)
	default:
		return h.toMembers(members, 0, it)
	}
}

// routeEdit sends message.edited to the members, with its body emptied
// for those whose history floor reaches the message it rewrites
// (chat.Event.BeforeFloor), as history and catch-up show it them.
func (h *Hub) routeEdit(ev chat.Event, r chat.Routing, large bool, it item) int {
	var hidden []byte
	for _, f := range r.Floors {
		if e, hide := ev.BeforeFloor(f); hide {
			var err error
			if hidden, err = h.encode(e, large); err != nil {
				return 0
			}
			break
		}
	}
	if hidden == nil {
		return h.toMembers(r.Members, 0, it)
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for i, u := range r.Members {
		out := it
		if _, hide := ev.BeforeFloor(r.Floors[i]); hide {
			out.payload = hidden
		}
		for _, s := range h.byUser[u] {
			s.offer(out)
			n++
		}
	}
	return n
}

// routeDelivered sends delivery.updated to the sender whose messages were
// delivered (senderId), if still a member; without one, to the other
// members. Large groups get none: the seen endpoint and history answer
// instead.
func (h *Hub) routeDelivered(ev chat.Event, members []int64, large bool, it item) int {
	if large {
		return 0
	}
	if ev.SenderID == 0 {
		return h.toMembers(members, ev.UserID, it)
	}
	if _, ok := slices.BinarySearch(members, ev.SenderID); ok && ev.SenderID != ev.UserID {
		return h.toSessions(ev.SenderID, it)
	}
	return 0
}

// encode is ev's payload, slim for large groups' messages and reactions.
// It leaves out EventID, the Kafka record's identity that an event
// relayed from another node carries: a client gets one event in one shape
// on every node, and the committing node's own events, like those read
// back from PostgreSQL, have none (docs/protocol.md, Events).
func (h *Hub) encode(ev chat.Event, large bool) ([]byte, error) {
	ev.EventID = 0
	ev.PresenceHiddenFrom, ev.PresenceHidden, ev.PresenceShown = nil, nil, nil // for the nodes, not the clients
	if large {
		ev = ev.Slim()
	}
	b, err := chat.EncodeEvent(ev)
	if err != nil {
		h.opts.Logger.Error("encode event for fan-out", "type", ev.Type, "err", err)
	}
	return b, err
}

// toSessions offers its, in one offer, to user's sessions and returns
// how many.
func (h *Hub) toSessions(user int64, its ...item) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.byUser[user] {
		s.offer(its...)
	}
	return len(h.byUser[user])
}

// toMembers offers it to the sessions of members but except and returns
// how many.
func (h *Hub) toMembers(members []int64, except int64, it item) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, u := range members {
		if u == except {
			continue
		}
		for _, s := range h.byUser[u] {
			s.offer(it)
			n++
		}
	}
	return n
}

// toUsers queues ev on the events topic of every session of users on this
// node (presence, which has no conversation to route by); like every live
// event it is dropped for sessions not subscribed to their events topic
// yet.
func (h *Hub) toUsers(users []int64, ev chat.Event) {
	payload, err := h.encode(ev, false)
	if err != nil {
		return
	}
	h.toMembers(users, 0, item{kind: kEvent, payload: payload, qos: 1})
}
