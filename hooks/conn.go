package hooks

import (
	"bytes"
	"errors"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tcpacked"
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

var _ chat.AckedConn = (*mqttConn)(nil)

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

// Acked reads what the client's TCP acknowledged (chat.AckedConn).
func (c *mqttConn) Acked() (uint64, bool) { return tcpacked.Read(c.cl.Net.Conn) }

// encodeAck appends a PUBACK as mochi's WritePacket would encode it for
// cl: a v5 reason code, reason string and user properties, unless the
// client asked for no problem information; v3.1.1 gets the packet id
// alone. The PUBACK never exceeds the client's Maximum Packet Size
// [MQTT-3.1.2-24]: mochi's encoder weighs the reason string and the user
// properties each on its own, without the other or the packet's header,
// so both together could exceed it. The reason string, for people, goes
// first, then the user properties [MQTT-3.4.2-2] [MQTT-3.4.2-3].
func encodeAck(buf *bytes.Buffer, a *chat.Ack, cl *mqtt.Client) error {
	if cl.Properties.ProtocolVersion != 5 {
		buf.Grow(4)
		buf.WriteByte(packets.Puback << 4)
		buf.WriteByte(2)
		writeUint16(buf, int(a.PacketID))
		return nil
	}
	p := pubackV5{
		id: a.PacketID, code: a.Reason, reason: a.Message, user: a.Props,
		maxSize:  cl.Properties.Props.MaximumPacketSize,
		noReason: cl.Properties.Props.RequestProblemInfoFlag && cl.Properties.Props.RequestProblemInfo == 0,
	}
	for {
		n := p.encode(buf)
		if p.maxSize == 0 || uint32(n) <= p.maxSize || (p.reason == "" && len(p.user) == 0) {
			return nil
		}
		buf.Truncate(buf.Len() - n)
		if p.reason != "" {
			p.reason = ""
		} else {
			p.user = nil
		}
	}
}

// pubackV5 is a v5 PUBACK as chatd sends it.
type pubackV5 struct {
	id       uint16
	code     byte
	reason   string
	user     []chat.KV
	maxSize  uint32
	noReason bool // the client asked for no problem information
}

// encode appends p, byte for byte what mochi's packets.Packet.PubackEncode
// writes for the same packet, and returns the bytes written. Why not
// PubackEncode: its generic Properties.Encode asks canEncode (two map
// lookups) for each of ~30 properties and fills pooled scratch buffers,
// about 2% of chatd's CPU at 1,000 msgs/s for the one PUBACK a send gets.
// As in mochi: the reason string and the user properties are each left
// out when they alone (with the packet id, not the header or the other)
// would reach maxSize; the reason code is written only when it is an
// error or properties follow; a string's length prefix keeps its low 16
// bits. TestEncodeAckMatchesMochi and FuzzEncodeAck hold it to mochi.
func (p *pubackV5) encode(buf *bytes.Buffer) int {
	props := 0
	if !p.noReason && p.reason != "" && (p.maxSize == 0 || uint64(2+2+len(p.reason)+1) < uint64(p.maxSize)) {
		props += 1 + 2 + len(p.reason)
	}
	withReason := props > 0
	withUser := false
	if !p.noReason && len(p.user) > 0 {
		u := 0
		for _, kv := range p.user {
			u += 1 + 2 + len(kv.Key) + 2 + len(kv.Val)
		}
		if p.maxSize == 0 || uint64(2+u+1) < uint64(p.maxSize) {
			props += u
			withUser = true
		}
	}
	remaining := 2
	if p.code >= packets.ErrUnspecifiedError.Code || props > 0 {
		remaining++
	}
	if props > 0 {
		remaining += varintLen(props) + props
	}
	start := buf.Len()
	buf.Grow(1 + varintLen(remaining) + remaining)
	buf.WriteByte(packets.Puback << 4)
	writeVarint(buf, remaining)
	writeUint16(buf, int(p.id))
	if p.code >= packets.ErrUnspecifiedError.Code || props > 0 {
		buf.WriteByte(p.code)
	}
	if props > 0 {
		writeVarint(buf, props)
		if withReason {
			buf.WriteByte(packets.PropReasonString)
			writeUint16(buf, len(p.reason))
			buf.WriteString(p.reason)
		}
		if withUser {
			for _, kv := range p.user {
				buf.WriteByte(packets.PropUser)
				writeUint16(buf, len(kv.Key))
				buf.WriteString(kv.Key)
				writeUint16(buf, len(kv.Val))
				buf.WriteString(kv.Val)
			}
		}
	}
	return buf.Len() - start
}
