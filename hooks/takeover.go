package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
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
