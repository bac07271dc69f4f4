package hooks

import (
	"bytes"
	"errors"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// mqttConn is a mochi client as a chat.Conn: what the client's delivery
// session writes (PUBACKs of the client's publishes, then PUBLISHes) goes
// out in one system call under the client's lock, the lock mochi's own
// WritePacket holds, so it never interleaves with mochi's writes (CONNACK,
// SUBACK, PINGRESP). chatd never routes through mochi's outbound queue or
// lets mochi acknowledge a publish, so nothing there can overtake it.
type mqttConn struct {
	cl     *mqtt.Client
	events string // the user's events topic: where a Packet without a topic goes
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf bounds the buffers Write gives back to bufPool: enough for
// a burst of a few messages at the default body limit (16 KiB), while the
// buffer a rare large write grew to (a long burst, a large publish) goes
// to the garbage collector instead of staying pooled for every later
// write to carry.
const maxPooledBuf = 64 << 10

func putBuf(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBuf {
		return
	}
	bufPool.Put(buf)
}

func (c *mqttConn) Write(acks []chat.Ack, ps []chat.Packet) error {
	cl := c.cl
	if cl.Closed() {
		return mqtt.ErrConnectionClosed
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer putBuf(buf)
	maxSize := cl.Properties.Props.MaximumPacketSize
	version := cl.Properties.ProtocolVersion
	for i := range acks {
		if err := encodeAck(buf, &acks[i], cl); err != nil {
			return err
		}
	}
	for i := range ps {
		if ps[i].Topic == "" {
			ps[i].Topic = c.events
		}
		start := buf.Len()
		if err := encodePublish(buf, &ps[i], version); err != nil {
			return err
		}
		if maxSize > 0 && uint32(buf.Len()-start) > maxSize {
			// The client refuses packets this large: discarded, as
			// MQTT-3.1.2-25 asks (chat.Conn).
			buf.Truncate(start)
			ps[i].TooLarge = true
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

// encodeAck appends a PUBACK as mochi's WritePacket would encode it for
// cl: a v5 reason code, reason string and user properties, unless the
// client asked for no problem information; v3.1.1 gets the packet id
// alone. The PUBACK never exceeds the client's Maximum Packet Size
// [MQTT-3.1.2-24]: mochi's encoder weighs the reason string and the user
// properties each on its own, without the other or the packet's header,
// so both together could exceed it. The reason string, for people, goes
// first, then the user properties [MQTT-3.4.2-2] [MQTT-3.4.2-3].
func encodeAck(buf *bytes.Buffer, a *chat.Ack, cl *mqtt.Client) error {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Puback},
		PacketID:        a.PacketID,
		ProtocolVersion: cl.Properties.ProtocolVersion,
	}
	if pk.ProtocolVersion == 5 {
		pk.ReasonCode = a.Reason
		pk.Properties.ReasonString = a.Message
		// Room on the stack for the properties chatd's PUBACKs carry (at
		// most three), so encoding them allocates nothing.
		var users [4]packets.UserProperty
		if len(a.Props) > 0 {
			pk.Properties.User = users[:0]
		}
		for _, kv := range a.Props {
			pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: kv.Key, Val: kv.Val})
		}
		pk.Mods.MaxSize = cl.Properties.Props.MaximumPacketSize
		pk.Mods.DisallowProblemInfo = cl.Properties.Props.RequestProblemInfoFlag && cl.Properties.Props.RequestProblemInfo == 0
	}
	start := buf.Len()
	for {
		if err := pk.PubackEncode(buf); err != nil {
			return err
		}
		p := &pk.Properties
		if max := pk.Mods.MaxSize; max == 0 || uint32(buf.Len()-start) <= max || (p.ReasonString == "" && p.User == nil) {
			return nil
		}
		buf.Truncate(start)
		if p.ReasonString != "" {
			p.ReasonString = ""
		} else {
			p.User = nil
		}
	}
}
