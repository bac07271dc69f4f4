package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// tokenExpiredReason is the reason string of the DISCONNECT that ends a
// connection whose token expired.
const tokenExpiredReason = "the token (or client certificate) this connection was authenticated with has expired: reconnect with a new one"

// endAtAuthExpiry ends the connection when the token it connected with
// stops being accepted (Config.Verify's until), or its client certificate
// expires (Config.PeerUser's): credentials authorize a connection for
// their lifetime, not for as long as keepalives hold the connection open,
// so a stolen or withdrawn token (a short-lived certificate) stops working
// for the connections it opened as it does for new CONNECTs. MQTT 5 clients get
// DISCONNECT 0x87 not authorized with a reason string, 3.1.1 ones a close
// (withholdV311Disconnect); both reconnect with a fresh token.
func (h *Chat) endAtAuthExpiry(cl *mqtt.Client, ci *clientInfo) {
	if ci.authUntil.IsZero() {
		return
	}
	ci.authEnd = time.AfterFunc(time.Until(ci.authUntil), func() {
		if cl.Closed() {
			return
		}
		h.cfg.Logger.Info("token expired; disconnecting the client", "client", cl.ID, "user", ci.userID)
		_ = h.server.DisconnectClient(cl, packets.Code{Code: packets.ErrNotAuthorized.Code, Reason: tokenExpiredReason})
	})
}
