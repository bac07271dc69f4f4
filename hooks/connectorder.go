package hooks

import (
	"context"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// connectGate makes the CONNECTs of one client id on this node take their
// turns from the session's open (Sessions.Open, which makes the
// connection's token the session's) until mochi has listed the client
// (inheritClientSession, which takes over the connection it finds with
// the id, then Clients.Add) and written its CONNACK: a takeover by the
// next one cannot write its DISCONNECT before that CONNACK, which MQTT
// wants first [MQTT-3.2.0-1]. Without it two CONNECTs of a client id a few
// microseconds apart could open the session in one order and reach mochi
// in the other: the connection mochi kept did not hold the session's
// token, and the one that did was taken over, which ends nothing. Neither
// ended the session when it closed: a clean session's row stayed, marked
// connected, and a persistent one's expiry never started. (mochi's own
// look-up and listing are not atomic either: two CONNECTs could both find
// no client and both stay connected.)
type connectGate struct {
	turns sync.Map // client id -> chan struct{}, closed when the turn ends
}

// enter waits for clientID's turn; false when ctx ends first. The turn
// ends with the returned func, which may be called more than once.
func (g *connectGate) enter(ctx context.Context, clientID string) (leave func(), ok bool) {
	mine := make(chan struct{})
	for {
		held, taken := g.turns.LoadOrStore(clientID, mine)
		if !taken {
			var once sync.Once
			return func() {
				once.Do(func() {
					g.turns.Delete(clientID)
					close(mine)
				})
			}, true
		}
		select {
		case <-held.(chan struct{}):
		case <-ctx.Done():
			return nil, false
		}
	}
}

// endConnectTurn ends the connection's turn among the CONNECTs of its
// client id, if it has one that has not ended.
func (ci *clientInfo) endConnectTurn() {
	if ci.connected != nil {
		ci.connected()
	}
}

// cleanUpInTurn makes mochi's clean-up of cl, which ended without being
// taken over, run in a connect turn of its client id, ended by
// ConnectionEnded once mochi is done with the connection. That clean-up
// (mochi's attachClient, after OnDisconnect) checks that the client was
// not taken over and then deletes its client id from mochi's list: a
// CONNECT of the id that took it over and listed itself in between was
// the one deleted. It stayed connected, unlisted: the next CONNECT of the
// id took nothing over and both stayed open, the older without
// deliveries, and no other node's takeover notice could close it. A
// CONNECT lists itself within its turn, so now before the check (which
// then finds the client taken over) or after the delete.
//
// The turn ends after the send timeout at the latest, and the record of
// its end with it: a listener that did not call ConnectionEnded (chatd's
// call it for every connection; mochi's own do not) would otherwise keep
// the id's CONNECTs out, and the record, for good.
func (h *Chat) cleanUpInTurn(cl *mqtt.Client) {
	if cl.IsTakenOver() || cl.Net.Conn == nil {
		return // mochi cleans nothing up
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	leave, ok := h.gate.enter(ctx, cl.ID)
	if !ok {
		h.cfg.Logger.Warn("cleaning up a connection outside its client id's connect turn", "client", cl.ID,
			"err", "a connect of the client id did not finish in time")
		return
	}
	conn := cl.Net.Conn
	var bound *time.Timer
	// ConnectionEnded, which runs the record, comes after OnDisconnect
	// returned, so bound is set by then.
	h.ending.Store(conn, func() {
		bound.Stop()
		leave()
	})
	bound = time.AfterFunc(h.cfg.SendTimeout, func() {
		h.ending.Delete(conn)
		leave()
	})
}
