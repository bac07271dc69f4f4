package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// credential is who a connection authenticated as.
type credential struct {
	user int64
	// until is when the identity stops being accepted (the JWT's, the
	// certificate's expiry; zero: never).
	until time.Time
	// byToken: a JWT (else a client certificate). issuedAt is when the
	// credential was issued: the JWT's iat (zero: no iat claim), the
	// certificate's NotBefore.
	byToken  bool
	issuedAt time.Time
}

// authenticate returns the connecting user: the one the connection's
// transport identity names (mTLS), else the one of the JWT password. A
// transport identity replaces the password, which is then not looked at.
func (h *Chat) authenticate(cl *mqtt.Client, pk packets.Packet) (credential, error) {
	if h.cfg.PeerUser != nil && cl.Net.Conn != nil {
		if id, issued, until, presented, err := h.cfg.PeerUser(cl.Net.Conn); presented {
			return credential{user: id, until: until, issuedAt: issued}, err
		}
	}
	id, issued, until, err := h.cfg.Verify(string(pk.Connect.Password))
	return credential{user: id, until: until, byToken: true, issuedAt: issued}, err
}
