package hooks

import (
	"bytes"
	"errors"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/delivery"
)

// mqttConn is a mochi client as a delivery.Conn.
type mqttConn struct {
	cl *mqtt.Client
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// WritePublishes encodes the packets as mochi's WritePacket would (with
// encodePublish, which matches mochi's PublishEncode byte for byte) and
// writes them in one system call under the client's lock, the same lock
// WritePacket holds, so they never interleave with mochi's own writes
// (PUBACKs, SUBACKs). chatd never routes through mochi's outbound queue,
// so nothing is buffered there to overtake.
func (c *mqttConn) WritePublishes(ps []delivery.Packet) error {
	cl := c.cl
	if cl.Closed() {
		return mqtt.ErrConnectionClosed
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	maxSize := cl.Properties.Props.MaximumPacketSize
	version := cl.Properties.ProtocolVersion
	for i := range ps {
		start := buf.Len()
		if err := encodePublish(buf, &ps[i], version); err != nil {
			return err
		}
		if maxSize > 0 && uint32(buf.Len()-start) > maxSize {
			// The client refuses packets this large: it can never get
			// this event, so the session cannot go on.
			return packets.ErrPacketTooLarge
		}
	}
	if cl.Net.Conn == nil {
		return nil
	}
	cl.Lock()
	_, err := buf.WriteTo(cl.Net.Conn)
	cl.Unlock()
	return err
}

func (c *mqttConn) Close(reason string) {
	c.cl.Stop(errors.New(reason))
}
