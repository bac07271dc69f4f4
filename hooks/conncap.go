package hooks

import (
	"context"
	"fmt"
	"slices"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/shrink"
)

// SharedConns counts each user's connections across the nodes of a cluster
// (ratelimit.Limiter with Redis). A client id counts once however many
// nodes claim it. When the shared count cannot be reached, AddConn allows
// and each node's own count is the cap.
type SharedConns interface {
	AddConn(ctx context.Context, user int64, clientID, node string, max int) bool
	RemoveConn(ctx context.Context, user int64, clientID, node string)
	RefreshConns(ctx context.Context, node string, conns map[int64][]string) error
}

// userConns is this node's record of the connections each user holds, by
// client id: a reconnect with a client id the user holds already (a
// session takeover, a phone coming back before its old connection timed
// out) replaces a connection and never counts twice. Each client id maps
// to the mochi clients holding it, normally one; during a takeover the old
// and the new one for a moment.
//
// A client leaves when OnDisconnect runs, and also when it is found closed:
// mochi does not call OnDisconnect for a client whose CONNACK could not be
// written, and a slot must not stay taken for ever by a connection that
// never got going.
type userConns struct {
	mu sync.Mutex
	// byUser lists each user's clients in the order they came. A slice,
	// not maps: a user holds a handful (MaxConnectionsPerUser), usually
	// one, and this is memory per connection (a map of maps cost ~0.5 KiB).
	byUser map[int64][]heldConn
	peak   int // the most users byUser held since it was last copied (shrink.Map)
}

type heldConn struct {
	clientID string
	cl       *mqtt.Client
}

type userClient struct {
	user     int64
	clientID string
}

// holds reports whether conns has a client holding clientID.
func holds(conns []heldConn, clientID string) bool {
	for _, c := range conns {
		if c.clientID == clientID {
			return true
		}
	}
	return false
}

// distinctIDs returns the client ids conns hold, each once, in order.
func distinctIDs(conns []heldConn) []string {
	var ids []string
	for i, c := range conns {
		if !holds(conns[:i], c.clientID) {
			ids = append(ids, c.clientID)
		}
	}
	return ids
}

// set stores user's clients, forgetting the user when there are none.
func (u *userConns) set(user int64, conns []heldConn) {
	if len(conns) == 0 {
		delete(u.byUser, user)
		u.byUser = shrink.Map(u.byUser, &u.peak)
		return
	}
	u.byUser[user] = conns
}

// pruneLocked drops user's closed clients and returns the client ids left
// with none.
func (u *userConns) pruneLocked(user int64) []string {
	conns := u.byUser[user]
	ids := distinctIDs(conns)
	kept := conns[:0]
	for _, c := range conns {
		if !c.cl.Closed() {
			kept = append(kept, c)
		}
	}
	var emptied []string
	for _, id := range ids {
		if !holds(kept, id) {
			emptied = append(emptied, id)
		}
	}
	clear(conns[len(kept):])
	u.set(user, kept)
	return emptied
}

// admit records cl as clientID of user unless the user holds max other
// client ids already. emptied are client ids found without an open client
// on the way (to forget in the shared count).
func (u *userConns) admit(user int64, clientID string, cl *mqtt.Client, max int) (ok bool, emptied []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byUser == nil {
		u.byUser = map[int64][]heldConn{}
	}
	if !holds(u.byUser[user], clientID) && len(distinctIDs(u.byUser[user])) >= max {
		emptied = u.pruneLocked(user)
		if len(distinctIDs(u.byUser[user])) >= max {
			return false, emptied
		}
	}
	u.byUser[user] = append(u.byUser[user], heldConn{clientID, cl})
	return true, emptied
}

// leave forgets cl; last reports whether that was the last client holding
// clientID on this node (not when cl had been pruned already).
func (u *userConns) leave(user int64, clientID string, cl *mqtt.Client) (last bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	conns := u.byUser[user]
	i := slices.Index(conns, heldConn{clientID, cl})
	if i < 0 {
		return false
	}
	conns = slices.Delete(conns, i, i+1)
	u.set(user, conns)
	return !holds(conns, clientID)
}

// held prunes every user and returns the client ids each one holds, and
// the ones found without an open client.
func (u *userConns) held() (map[int64][]string, []userClient) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var emptied []userClient
	out := make(map[int64][]string, len(u.byUser))
	for user := range u.byUser {
		for _, id := range u.pruneLocked(user) {
			emptied = append(emptied, userClient{user, id})
		}
		if ids := distinctIDs(u.byUser[user]); len(ids) > 0 {
			out[user] = ids
		}
	}
	return out, emptied
}

// capCode is the CONNACK for a user over the connection cap: 0x97 quota
// exceeded (v5); 3.1.1 has no such code and gets 0x03 server unavailable,
// which keeps it retrying until one of the user's connections ends.
func (h *Chat) capCode(cl *mqtt.Client) packets.Code {
	if isV5(cl) {
		return packets.Code{Code: packets.ErrQuotaExceeded.Code,
			Reason: fmt.Sprintf("quota exceeded: at most %d connections per user; close another one (or reuse its client id)", h.cfg.MaxConnectionsPerUser)}
	}
	return packets.ErrServerUnavailable
}

// takeConnSlot admits cl under the user's connection cap, on this node and,
// with SharedConns, across nodes. The newest connection is the one
// refused: a device that comes back with its client id always gets in, and
// a stolen token cannot push the user's own devices off.
func (h *Chat) takeConnSlot(ctx context.Context, cl *mqtt.Client, user int64) bool {
	max := h.cfg.MaxConnectionsPerUser
	if max <= 0 {
		return true
	}
	ok, emptied := h.conns.admit(user, cl.ID, cl, max)
	for _, id := range emptied {
		h.forgetShared(ctx, user, id)
	}
	if !ok {
		return false
	}
	if h.cfg.SharedConns != nil && !h.cfg.SharedConns.AddConn(ctx, user, cl.ID, h.cfg.NodeID, max) {
		// Refused there, so not recorded there: only the local record goes.
		h.conns.leave(user, cl.ID, cl)
		return false
	}
	return true
}

// releaseConnSlot gives back cl's slot (OnDisconnect, or a CONNECT refused
// after takeConnSlot).
func (h *Chat) releaseConnSlot(cl *mqtt.Client, user int64) {
	if h.cfg.MaxConnectionsPerUser <= 0 {
		return
	}
	if h.conns.leave(user, cl.ID, cl) {
		h.forgetShared(context.Background(), user, cl.ID)
	}
}

func (h *Chat) forgetShared(ctx context.Context, user int64, clientID string) {
	if h.cfg.SharedConns != nil {
		h.cfg.SharedConns.RemoveConn(ctx, user, clientID, h.cfg.NodeID)
	}
}

// RefreshConnections keeps this node's connections counted in the shared
// count (they expire there unless refreshed, so that a dead node's stop
// counting) and forgets connections that ended without OnDisconnect. The
// owner calls it every ratelimit.ConnRefreshInterval.
func (h *Chat) RefreshConnections(ctx context.Context) error {
	if h.cfg.MaxConnectionsPerUser <= 0 {
		return nil
	}
	held, emptied := h.conns.held()
	for _, uc := range emptied {
		h.forgetShared(ctx, uc.user, uc.clientID)
	}
	if h.cfg.SharedConns == nil {
		return nil
	}
	return h.cfg.SharedConns.RefreshConns(ctx, h.cfg.NodeID, held)
}
