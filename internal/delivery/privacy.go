package delivery

import (
	"slices"

	chat "github.com/chatd/chatd"
)

// routeRead sends read.updated as its reader's and the members' read
// receipt settings allow (the store marks the event when it commits, so
// every node routes it alike without asking PostgreSQL): a Private event
// (the reader's receipts are off) reaches the reader's own sessions only,
// and the members listed in Except (theirs are off) never get another
// member's. Except is the members' settings, not for clients: the payload
// is encoded again without it. It returns how many sessions it was offered
// to.
func (h *Hub) routeRead(ev chat.Event, members []int64, large bool, it item) int {
	if !ev.Private && len(ev.Except) == 0 {
		return h.toMembers(members, 0, it)
	}
	except := ev.Except
	ev.Except = nil
	payload, err := h.encode(ev, large)
	if err != nil {
		return 0
	}
	it.payload = payload
	if ev.Private {
		if _, ok := slices.BinarySearch(members, ev.UserID); ok {
			return h.toSessions(ev.UserID, it)
		}
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, u := range members {
		if u != ev.UserID && slices.Contains(except, u) {
			continue
		}
		for _, s := range h.byUser[u] {
			s.offer(it)
			n++
		}
	}
	return n
}
