package hooks

import (
	"context"
	"sync"
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
