package hooks

import (
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/shrink"
)

// TakeoverGrace bounds how long a takeover waits for the connection it
// takes over to take its DISCONNECT (0x8E). mochi writes that DISCONNECT
// inside the new connection's CONNECT, under the old client's write lock
// and with no deadline of its own: an old peer that reads nothing (a
// phone that lost its network while deliveries filled its socket) would
// hold the new connection without a CONNACK, and with it the client id's
// connect turn (connectorder.go), so every later CONNECT of the id would
// be refused as unavailable, until the write watchdog or the keepalive
// freed the socket. Past the grace the old connection is closed without
// its DISCONNECT; the new one's CONNACK still comes only after it ended
// [MQTT-3.1.4-3]. A takeover by a connection on another node
// (SessionTakenOver) closes it within the grace too.
const TakeoverGrace = time.Second

// boundTakeover arms the close of the connection cl is about to take
// over (the client mochi lists with cl's id); stop disarms it, once the
// takeover is done. Called in OnConnect within cl's connect turn, after
// which mochi takes over at once: no other CONNECT of the id can list
// itself meanwhile.
func (h *Chat) boundTakeover(cl *mqtt.Client) (stop func()) {
	old, ok := h.server.Clients.Get(cl.ID)
	if !ok || old == cl {
		return func() {}
	}
	t := h.closeAfterGrace(old)
	return func() { t.Stop() }
}

// closeAfterGrace closes the connection of old, which is being taken
// over, TakeoverGrace from now unless it has ended by then.
func (h *Chat) closeAfterGrace(old *mqtt.Client) *time.Timer {
	return time.AfterFunc(TakeoverGrace, func() {
		if old.Closed() {
			return
		}
		h.cfg.Logger.Info("closing a connection taken over that did not take its DISCONNECT in time", "client", old.ID, "remote", old.Net.Remote)
		old.Stop(packets.ErrSessionTakenOver)
	})
}

// closeTakenOver closes cl, whose session a connection on another node
// took over, with DISCONNECT 0x8E. It does not block: the DISCONNECT is
// written on a goroutine of its own, since a half-open socket can hold a
// write until its deadline; one that holds it past TakeoverGrace is
// closed without it.
func (h *Chat) closeTakenOver(cl *mqtt.Client) {
	h.cfg.Metrics.TakenOver.Inc()
	bound := h.closeAfterGrace(cl)
	go func() {
		_ = h.server.DisconnectClient(cl, packets.ErrSessionTakenOver)
		bound.Stop()
	}()
}

// takeoverNoticeMemory is how long a takeover notice naming a connection
// of this process that had no CONNACK yet is remembered: longer than a
// CONNECT takes from the session's open to its CONNACK (the open within
// the send timeout, the takeover within TakeoverGrace, then one write).
const takeoverNoticeMemory = time.Minute

// takeoverNotices are the takeover notices of late that named a
// connection of this process mochi did not list or had not written the
// CONNACK of (SessionTakenOver), by token: most named one that ended, the
// others one whose session opened and which has no CONNACK yet. Only the
// first kind stays until it is forgotten; there are few of them, since a
// connection that ends clears its token from the session, and no later
// open announces it.
type takeoverNotices struct {
	mu sync.Mutex
	m  map[string]time.Time // token -> when heard
	// pruned is when m was last swept of notices past their memory. A
	// sweep passes over all of m, so it runs at most every quarter of
	// the memory, not at each notice: a burst of notices (connections
	// whose disconnect could not clear their token, their clients now
	// connecting elsewhere) would cost the square of their number.
	pruned time.Time
	peak   int // the most entries m held since it was last copied (shrink.Map)
}

// listedOrNoted returns the client mochi lists with clientID when token
// is its connection's and its CONNACK was written; otherwise it notes
// token. Both under mu, and a connection marks its CONNACK written before
// it checks heard: one found without the mark checks heard after the
// note.
func (n *takeoverNotices) listedOrNoted(h *Chat, clientID, token string) (*mqtt.Client, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cl, ok := h.server.Clients.Get(clientID); ok {
		if ci := h.info(cl); ci != nil && ci.token == token && ci.connacked.Load() {
			return cl, true
		}
	}
	now := time.Now()
	if n.m == nil {
		n.m = map[string]time.Time{}
	}
	if now.Sub(n.pruned) > takeoverNoticeMemory/4 {
		n.pruned = now
		for tok, heard := range n.m {
			if now.Sub(heard) > takeoverNoticeMemory {
				delete(n.m, tok)
			}
		}
	}
	n.m[token] = now
	n.m = shrink.Map(n.m, &n.peak) // a burst's table is given back once forgotten
	return nil, false
}

// heard reports, once, whether a notice named token before its
// connection had its CONNACK. Called once it has.
func (n *takeoverNotices) heard(token string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.m[token]
	delete(n.m, token)
	n.m = shrink.Map(n.m, &n.peak)
	return ok
}
