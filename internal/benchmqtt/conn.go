package benchmqtt

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqttwire"
)

// Conn is a lean MQTT 3.1.1/5 client connection for load generation:
// one reader goroutine; a publish is written by the goroutine that makes
// it and a PUBACK by the reader, each at once (a hand-off to a writer
// goroutine cost a wake-up per packet), except that the reader holds its
// PUBACKs back while another whole packet is already buffered and writes
// them together before it next waits. QoS 1 publishes complete by
// callback instead of a goroutine each. Packets are encoded and decoded
// with mochi's codec (the PUBLISH and PUBACK it sends by hand, to the
// same bytes), which speaks both protocol versions (paho.golang speaks
// only v5).
type Conn struct {
	version byte
	nc      net.Conn

	mu      sync.Mutex
	nextID  uint16
	waiters map[uint16]func(packets.Packet, error)
	suback  chan packets.Packet
	closed  bool

	wmu     sync.Mutex
	wbuf    []byte // packets not written yet (the reader's held PUBACKs)
	wfailed bool   // a write failed: the connection is closed
	wrote   atomic.Bool

	onPublish func(packets.Packet)

	done chan struct{} // closed when the reader stops
	err  error         // why (read after done)
}

// Options are CONNECT parameters.
type Options struct {
	Version    byte // 4 or 5
	ClientID   string
	Username   string
	Password   string
	CleanStart bool
	Expiry     uint32 // v5 session expiry; v4 uses CleanStart only
	KeepAlive  uint16
	// OnPublish runs on the reader goroutine and must not block long; the
	// packet's TopicName and Payload are valid only until it returns.
	OnPublish func(packets.Packet)

	// LocalAddr is the source IP to dial from ("" lets the kernel pick):
	// one source address has about 28,000 ephemeral ports towards one
	// server port, so many connections spread over several 127.0.0.x.
	LocalAddr string
	// BufferSize is the read buffer size (default 64 KiB, for senders at
	// full rate). Thousands of idle connections want it small.
	BufferSize int
}

// ErrConnLost completes publishes whose PUBACK never came.
var ErrConnLost = errors.New("connection lost before PUBACK")

// Dial connects, sends CONNECT and waits for a successful CONNACK, which
// it returns (a refusal is an error, with the CONNACK).
func Dial(addr string, o Options) (*Conn, packets.Packet, error) {
	if o.BufferSize <= 0 {
		o.BufferSize = 64 * 1024
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	if o.LocalAddr != "" {
		ip := net.ParseIP(o.LocalAddr)
		if ip == nil {
			return nil, packets.Packet{}, fmt.Errorf("dial: bad source address %q", o.LocalAddr)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, packets.Packet{}, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &Conn{version: o.Version, nc: nc,
		waiters: map[uint16]func(packets.Packet, error){}, suback: make(chan packets.Packet, 4),
		onPublish: o.OnPublish, done: make(chan struct{})}
	connect := mqttwire.Connect(o.Version, mqttwire.Login{ClientID: o.ClientID, Username: o.Username, Password: o.Password,
		Clean: o.CleanStart, Keepalive: o.KeepAlive, Expiry: o.Expiry})
	r := bufio.NewReaderSize(nc, o.BufferSize)
	ack, err := mqttwire.Handshake(nc, r, connect, 15*time.Second)
	if err != nil {
		return nil, ack, err
	}
	go c.readLoop(r)
	go c.pingLoop(o.KeepAlive)
	return c, ack, nil
}

func (c *Conn) readLoop(r *bufio.Reader) {
	var err error
	defer func() {
		c.mu.Lock()
		c.closed = true
		ws := c.waiters
		c.waiters = map[uint16]func(packets.Packet, error){}
		c.mu.Unlock()
		c.err = err
		close(c.done)
		c.nc.Close()
		for _, w := range ws {
			w(packets.Packet{}, ErrConnLost)
		}
	}()
	for {
		var pk packets.Packet
		if !packetBuffered(r) {
			c.flush() // the held PUBACKs, before the reader waits
			if _, err = r.Peek(1); err != nil {
				return
			}
		}
		pk, n, peeked := peekPublish(r, c.version)
		if peeked {
			_, _ = r.Discard(n) // pk stays valid until the next read of r
		} else if pk, err = mqttwire.Read(r, c.version); err != nil {
			return
		}
		switch pk.FixedHeader.Type {
		case packets.Publish:
			if pk.FixedHeader.Qos > 0 {
				c.wmu.Lock()
				c.wbuf = appendPuback(c.wbuf, pk.PacketID)
				c.wmu.Unlock()
			}
			if c.onPublish != nil {
				c.onPublish(pk)
			}
		case packets.Puback:
			c.mu.Lock()
			w := c.waiters[pk.PacketID]
			delete(c.waiters, pk.PacketID)
			c.mu.Unlock()
			if w != nil {
				w(pk, nil)
			}
		case packets.Suback:
			select {
			case c.suback <- pk:
			default:
			}
		case packets.Disconnect:
			err = fmt.Errorf("server sent DISCONNECT 0x%02x", pk.ReasonCode)
			return
		}
	}
}

// pingLoop sends PINGREQ when nothing was written in the last half
// keepalive, so never more than a keepalive after the last write (a flag
// per write is cheaper than a timer reset per write).
func (c *Conn) pingLoop(keepAlive uint16) {
	ping := time.Duration(keepAlive) * time.Second / 2
	if ping <= 0 {
		return
	}
	pingPk, _ := mqttwire.Encode(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}})
	t := time.NewTimer(ping)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if !c.wrote.Swap(false) {
				c.write(pingPk)
			}
			t.Reset(ping)
		case <-c.done:
			return
		}
	}
}

// write writes b, after any PUBACKs the reader holds.
func (c *Conn) write(b []byte) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, b...)
	c.flushLocked()
	c.wmu.Unlock()
}

// flush writes what is waiting.
func (c *Conn) flush() {
	c.wmu.Lock()
	c.flushLocked()
	c.wmu.Unlock()
}

func (c *Conn) flushLocked() {
	if len(c.wbuf) == 0 {
		return
	}
	if !c.wfailed {
		if _, err := c.nc.Write(c.wbuf); err != nil {
			c.wfailed = true
			c.nc.Close() // the reader ends the connection
		}
		c.wrote.Store(true)
	}
	if cap(c.wbuf) > 64*1024 {
		c.wbuf = nil
	} else {
		c.wbuf = c.wbuf[:0]
	}
}

// Publish sends a publish; for QoS 1 done runs with the PUBACK (or
// ErrConnLost) on the reader goroutine. QoS 0 calls done at once.
func (c *Conn) Publish(topic string, qos byte, payload []byte, done func(packets.Packet, error)) {
	var pk packets.Packet
	if qos > 0 {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			done(packets.Packet{}, ErrConnLost)
			return
		}
		for {
			c.nextID++
			if c.nextID == 0 {
				c.nextID = 1
			}
			if _, busy := c.waiters[c.nextID]; !busy {
				break
			}
		}
		pk.PacketID = c.nextID
		c.waiters[pk.PacketID] = done
		c.mu.Unlock()
	}
	c.wmu.Lock()
	c.wbuf = appendPublish(c.wbuf, c.version, qos, pk.PacketID, topic, payload)
	c.flushLocked()
	c.wmu.Unlock()
	if qos == 0 {
		done(packets.Packet{}, nil)
	}
}

// Subscribe subscribes to filters at QoS 1 and waits for the SUBACK.
func (c *Conn) Subscribe(filters []string) error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, ProtocolVersion: c.version}
	c.mu.Lock()
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	pk.PacketID = c.nextID
	c.mu.Unlock()
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: 1})
	}
	b, err := mqttwire.Encode(pk)
	if err != nil {
		return err
	}
	c.write(b)
	select {
	case ack := <-c.suback:
		for _, rc := range ack.ReasonCodes {
			if rc >= 0x80 {
				return fmt.Errorf("subscribe refused with reason 0x%02x", rc)
			}
		}
		return nil
	case <-c.done:
		return fmt.Errorf("connection closed before SUBACK: %w", c.err)
	case <-time.After(15 * time.Second):
		return errors.New("no SUBACK within 15s")
	}
}

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (after Done is closed).
func (c *Conn) Err() error { return c.err }

// Drop closes the TCP connection without DISCONNECT (a lost network).
func (c *Conn) Drop() { c.nc.Close() }

// Disconnect sends DISCONNECT, then closes.
func (c *Conn) Disconnect() {
	if b, err := mqttwire.Encode(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ProtocolVersion: c.version}); err == nil {
		c.write(b)
	}
	c.nc.Close()
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		c.nc.Close()
	}
}
