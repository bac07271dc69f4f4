package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// authenticate returns the connecting user: the one the connection's
// transport identity names (mTLS), else the one of the JWT password. A
// transport identity replaces the password, which is then not looked at.
// until is when the identity stops being accepted (the JWT's, the
// certificate's expiry).
func (h *Chat) authenticate(cl *mqtt.Client, pk packets.Packet) (user int64, until time.Time, err error) {
	if h.cfg.PeerUser != nil && cl.Net.Conn != nil {
		if id, until, presented, err := h.cfg.PeerUser(cl.Net.Conn); presented {
			return id, until, err
		}
	}
	return h.cfg.Verify(string(pk.Connect.Password))
}
