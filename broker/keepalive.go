package broker

import (
	"time"
)

// SetKeepalive makes the connection time out after exactly 1.5 ×
// keepalive without a packet from the client [MQTT-3.1.2-22]. mochi sets
// that deadline in whole seconds, keepalive + keepalive/2, which for an odd
// keepalive is half a second short (1 s for 1 s, 4 s for 3 s): a client
// pinging every keepalive lost its connection whenever its PINGREQ came a
// little late. hooks.Chat calls it once it has settled the keepalive.
func (c *connectCapped) SetKeepalive(keepalive time.Duration) {
	c.timeout.Store(int64(keepalive * 3 / 2))
	c.pending.forget(c) // its CONNECT came
}

// SetDeadline puts mochi's keepalive deadline (its one use of SetDeadline,
// set before each packet is read) at 1.5 × the keepalive from now, once
// SetKeepalive has said it; no deadline stays no deadline.
func (c *connectCapped) SetDeadline(t time.Time) error {
	if d := time.Duration(c.timeout.Load()); d > 0 && !t.IsZero() {
		t = time.Now().Add(d)
	}
	return c.Conn.SetDeadline(t)
}
