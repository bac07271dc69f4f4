// Package mqtttest is a raw MQTT 3.1.1/5 client for tests that need control
// no library client gives: not acknowledging, not reading, exact reason
// codes, v3.1.1. Packets are encoded and decoded with mochi's packets
// package, an implementation independent of the server's hooks. One
// goroutine reads; methods are safe for concurrent use. PlainBroker is
// the broker without chatd's hooks that load tools are measured against.
package mqtttest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqttwire"
)

// Client is a raw MQTT connection.
type Client struct {
	Version byte
	conn    net.Conn
	r       *bufio.Reader
	wmu     sync.Mutex
	handMu  sync.Mutex // a publish's hand-on and PUBACK, against Disconnect (handOn)

	// AutoAck acknowledges incoming QoS1 publishes (default true).
	AutoAck bool

	Publishes chan packets.Packet // incoming PUBLISH

	// Without Options.ReadBuffer, publishes that find Publishes full wait
	// in overflow, in order, for pump to hand them on (guarded by qmu):
	// the read loop never waits for the test to read.
	unbounded bool
	qmu       sync.Mutex
	overflow  []packets.Packet
	ended     bool          // the read loop ended on a read error: pump closes Publishes
	queued    chan struct{} // wakes pump

	mu        sync.Mutex
	waiters   map[uint16]chan packets.Packet // PUBACK by packet id
	ackOrder  []uint16                       // packet ids of PUBACKs, as they arrived
	subacks   chan packets.Packet
	nextID    uint16
	Done      chan struct{}
	Err       error
	stopRead  chan struct{} // closed by StopReading
	held      chan struct{} // closed by ResumeReading; nil when not held (guarded by mu)
	stopOnce  sync.Once
	closing   chan struct{}
	closeOnce sync.Once
	// disconnect is the DISCONNECT the server sent, if any (guarded by mu).
	disconnect *packets.Packet
}

// StopReading makes the client stop reading from its socket for good: a
// stuck subscriber whose TCP window fills up. It returns at once; a read
// already waiting for a packet takes that one packet, then reading stops
// (waiting for the read would hold the caller until the server sent
// something, on an idle connection until its keepalive closed it).
func (c *Client) StopReading() { c.stopOnce.Do(func() { close(c.stopRead) }) }

// HoldReading makes the client stop reading from its socket until
// ResumeReading: a client that reads nothing for a while, whose TCP
// window fills up, and then goes on. It returns at once; a read already
// waiting for a packet takes that one packet first, as in StopReading.
func (c *Client) HoldReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = make(chan struct{})
	}
}

// ResumeReading ends HoldReading.
func (c *Client) ResumeReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		close(c.held)
		c.held = nil
	}
}

// Options for Dial.
type Options struct {
	Version   byte // 4 (3.1.1) or 5
	ClientID  string
	Username  string
	Password  string
	Clean     bool
	Expiry    uint32 // v5 session expiry interval
	Keepalive uint16
	// ReadBuffer, when set, bounds the publishes received and not yet
	// taken from Publishes (its size): beyond, the client stops reading
	// (and acknowledging) until the test takes one, a slow subscriber.
	// Unset, the client reads on whatever the test takes: Publishes holds
	// DefaultReadBuffer, and the publishes beyond wait in a queue that
	// grows as needed.
	ReadBuffer int
	// Will, when its Topic is set, is the connection's Will message.
	Will Will
	// LocalAddr is the source IP address to dial from ("" = any), so one
	// test can be many clients behind one address, or several addresses.
	LocalAddr string
	// Properties are extra v5 CONNECT properties (Receive Maximum, Topic
	// Alias Maximum, ...); Expiry still sets the session expiry.
	Properties packets.Properties
	// NoAutoAck starts the client with AutoAck false: a resumed session's
	// deliveries may arrive before the caller could clear it.
	NoAutoAck bool
}

// DefaultReadBuffer is the size of Publishes when Options.ReadBuffer is
// unset. A packet takes 800 bytes there: the 100,000 it once was made
// every client allocate 80 MB at its connect.
const DefaultReadBuffer = 1024

// Will is a CONNECT's Will message.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
	Delay   uint32 // v5 Will Delay Interval, seconds
}

// Dial connects and returns the client with its CONNACK.
func Dial(addr string, o Options) (*Client, packets.Packet, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if o.LocalAddr != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.LocalAddr)}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, packets.Packet{}, err
	}
	return DialConn(conn, o)
}

// DialConn runs the MQTT handshake over an established connection (a
// WebSocket adapter, a fault-injecting proxy).
func DialConn(conn net.Conn, o Options) (*Client, packets.Packet, error) {
	if o.Version == 0 {
		o.Version = 5
	}
	if o.Keepalive == 0 {
		o.Keepalive = 30
	}
	unbounded := o.ReadBuffer == 0
	if unbounded {
		o.ReadBuffer = DefaultReadBuffer
	}
	c := &Client{Version: o.Version, conn: conn, r: bufio.NewReader(conn), AutoAck: !o.NoAutoAck,
		Publishes: make(chan packets.Packet, o.ReadBuffer), unbounded: unbounded, queued: make(chan struct{}, 1), waiters: map[uint16]chan packets.Packet{},
		subacks: make(chan packets.Packet, 16), Done: make(chan struct{}), closing: make(chan struct{}), stopRead: make(chan struct{})}
	pk := mqttwire.Connect(o.Version, mqttwire.Login{ClientID: o.ClientID, Username: o.Username, Password: o.Password,
		Clean: o.Clean, Keepalive: o.Keepalive, Expiry: o.Expiry, Properties: o.Properties})
	if o.Will.Topic != "" {
		pk.Connect.WillFlag = true
		pk.Connect.WillTopic = o.Will.Topic
		pk.Connect.WillPayload = o.Will.Payload
		pk.Connect.WillQos = o.Will.QoS
		pk.Connect.WillRetain = o.Will.Retain
		pk.Connect.WillProperties.WillDelayInterval = o.Will.Delay
	}
	ack, err := mqttwire.Handshake(conn, c.r, pk, 10*time.Second)
	if err != nil {
		return nil, ack, err
	}
	go c.readLoop()
	if unbounded {
		go c.pump()
	}
	return c, ack, nil
}

func (c *Client) write(pk packets.Packet) error {
	pk.ProtocolVersion = c.Version
	b, err := mqttwire.Encode(pk)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err = c.conn.Write(b)
	return err
}

func (c *Client) readLoop() {
	defer close(c.Done)
	for {
		select {
		case <-c.stopRead:
			<-c.closing
			return
		default:
		}
		c.mu.Lock()
		held := c.held
		c.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-c.stopRead:
				continue
			case <-c.closing: // the read below fails and ends the loop
			}
		}
		pk, err := mqttwire.Read(c.r, c.Version)
		if err != nil {
			c.Err = err
			c.mu.Lock()
			for id, w := range c.waiters {
				close(w)
				delete(c.waiters, id)
			}
			c.mu.Unlock()
			if c.unbounded {
				c.qmu.Lock()
				c.ended = true // pump closes Publishes once it handed on the rest
				c.qmu.Unlock()
				c.wake()
			} else {
				close(c.Publishes)
			}
			return
		}
		switch pk.FixedHeader.Type {
		case packets.Publish:
			if !c.handOn(pk) {
				continue // dropped by us: the read fails next and ends the loop
			}
		case packets.Puback:
			c.mu.Lock()
			w := c.waiters[pk.PacketID]
			delete(c.waiters, pk.PacketID)
			c.ackOrder = append(c.ackOrder, pk.PacketID)
			c.mu.Unlock()
			if w != nil {
				w <- pk
			}
		case packets.Suback, packets.Unsuback:
			c.subacks <- pk
		case packets.Disconnect:
			c.mu.Lock()
			c.disconnect = &pk
			c.mu.Unlock()
		}
	}
}

// handOn delivers a publish and acknowledges it (AutoAck, QoS 1). An
// unbounded client (deliver never waits) does both under handMu, which
// Disconnect takes too: a test that saw a publish and then disconnects has
// its PUBACK sent first, as an application acknowledges what it took
// before it says goodbye; else the server would rightly send it again to
// the session's next connection.
func (c *Client) handOn(pk packets.Packet) bool {
	if c.unbounded {
		c.handMu.Lock()
		defer c.handMu.Unlock()
	}
	if !c.deliver(pk) {
		return false
	}
	if pk.FixedHeader.Qos == 1 && c.AutoAck {
		_ = c.Ack(pk.PacketID)
	}
	return true
}

// deliver hands a publish to Publishes: bounded, it waits for room
// (false when the client is closed meanwhile); unbounded, a publish that
// finds Publishes full or others waiting before it joins the overflow.
func (c *Client) deliver(pk packets.Packet) bool {
	if !c.unbounded {
		select {
		case c.Publishes <- pk:
			return true
		case <-c.closing:
			return false
		}
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if len(c.overflow) == 0 {
		select {
		case c.Publishes <- pk:
			return true
		default:
		}
	}
	c.overflow = append(c.overflow, pk)
	c.wake()
	return true
}

func (c *Client) wake() {
	select {
	case c.queued <- struct{}{}:
	default:
	}
}

// pump hands the overflow on to Publishes, oldest first: a publish leaves
// the overflow only once it is in Publishes, so one that the read loop
// finds the overflow empty for comes after it. It goes on once the client
// is closed (Drop): what was read stays for the test to take, as it did
// in a channel long enough for all of it, and a pump whose test never
// takes it waits until the test process ends. After a read error it
// closes Publishes when nothing waits; when the read loop stopped for
// StopReading it leaves Publishes open, as the bounded one does.
func (c *Client) pump() {
	for {
		c.qmu.Lock()
		for len(c.overflow) == 0 && !c.ended {
			c.qmu.Unlock()
			select {
			case <-c.queued:
			case <-c.Done:
				c.qmu.Lock()
				if len(c.overflow) == 0 && !c.ended {
					c.qmu.Unlock()
					return
				}
				c.qmu.Unlock()
			}
			c.qmu.Lock()
		}
		if len(c.overflow) == 0 {
			c.qmu.Unlock()
			close(c.Publishes)
			return
		}
		pk := c.overflow[0]
		c.qmu.Unlock()
		c.Publishes <- pk
		c.qmu.Lock()
		c.overflow[0] = packets.Packet{}
		c.overflow = c.overflow[1:]
		if len(c.overflow) == 0 {
			c.overflow = nil // the array goes: it only shrinks from the front
		}
		c.qmu.Unlock()
	}
}

// ServerDisconnect returns the DISCONNECT packet the server sent, if it
// sent one before closing (MQTT 5 only; 3.1.1 servers just close).
func (c *Client) ServerDisconnect() (packets.Packet, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disconnect == nil {
		return packets.Packet{}, false
	}
	return *c.disconnect, true
}

// Send writes pk as it is (packet id, flags and properties included): a
// packet no other method makes, such as an AUTH, a SUBSCRIBE with
// properties or a retransmission with DUP set.
func (c *Client) Send(pk packets.Packet) error { return c.write(pk) }

// Ack sends a PUBACK.
func (c *Client) Ack(id uint16) error {
	return c.write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: id})
}

// ErrNoAck means the connection ended before the PUBACK.
var ErrNoAck = errors.New("mqtttest: connection closed before PUBACK")

// PublishOpts are optional v5 properties.
type PublishOpts struct {
	ResponseTopic   string
	CorrelationData []byte
	Retain          bool
	// TopicAlias (v5) sets an alias for the topic, or with an empty topic
	// uses one set before.
	TopicAlias uint16
	// User are v5 user properties (a traceparent, say).
	User []packets.UserProperty
}

// AckOrder returns the packet ids of the PUBACKs received so far, in the
// order they arrived.
func (c *Client) AckOrder() []uint16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint16(nil), c.ackOrder...)
}

// Pending is a QoS 1 publish written and not yet known to be acknowledged.
type Pending struct {
	ID   uint16
	c    *Client
	wait chan packets.Packet
}

// Wait waits for the PUBACK of the publish.
func (p Pending) Wait() (packets.Packet, error) { return p.c.waitAck(p.wait) }

// PublishAsync writes a QoS 1 publish without waiting for its PUBACK: a
// client with several publishes in flight.
func (c *Client) PublishAsync(topic string, payload []byte) (Pending, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: topic, Payload: payload}
	w := c.awaitAck(&pk)
	if err := c.write(pk); err != nil {
		return Pending{}, err
	}
	return Pending{ID: pk.PacketID, c: c, wait: w}, nil
}

// Publish sends a publish; for QoS1 it waits for the PUBACK (timeout).
func (c *Client) Publish(topic string, qos byte, payload []byte, opts ...PublishOpts) (packets.Packet, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, TopicName: topic, Payload: payload}
	if len(opts) > 0 {
		pk.Properties.ResponseTopic = opts[0].ResponseTopic
		pk.Mods.AllowResponseInfo = true // mochi encodes Response Topic only with this set
		pk.Properties.CorrelationData = opts[0].CorrelationData
		pk.FixedHeader.Retain = opts[0].Retain
		if opts[0].TopicAlias > 0 {
			pk.Properties.TopicAlias = opts[0].TopicAlias
			pk.Properties.TopicAliasFlag = true
		}
		pk.Properties.User = opts[0].User
	}
	var w chan packets.Packet
	if qos > 0 {
		w = c.awaitAck(&pk)
	}
	if err := c.write(pk); err != nil {
		return packets.Packet{}, err
	}
	if qos == 0 {
		return packets.Packet{}, nil
	}
	return c.waitAck(w)
}

func (c *Client) waitAck(w chan packets.Packet) (packets.Packet, error) {
	select {
	case ack, ok := <-w:
		if !ok {
			return packets.Packet{}, ErrNoAck
		}
		return ack, nil
	case <-c.Done:
		// The read loop has ended; a waiter registered after it closed the
		// others would never be closed.
		select {
		case ack, ok := <-w:
			if ok {
				return ack, nil
			}
		default:
		}
		return packets.Packet{}, ErrNoAck
	case <-time.After(60 * time.Second):
		return packets.Packet{}, errors.New("mqtttest: PUBACK timeout")
	}
}

// Subscribe subscribes at QoS1 and returns the SUBACK reason codes.
func (c *Client) Subscribe(filters ...string) ([]byte, error) { return c.SubscribeAt(1, filters...) }

// SubscribeAt subscribes at qos and returns the SUBACK reason codes.
func (c *Client) SubscribeAt(qos byte, filters ...string) ([]byte, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: qos})
	}
	ack, err := c.subscription(pk, "SUBACK")
	if err != nil {
		return nil, err
	}
	return ack.ReasonCodes, nil
}

// Unsubscribe unsubscribes from filters and returns the UNSUBACK's reason
// codes (MQTT 5; none for 3.1.1).
func (c *Client) Unsubscribe(filters ...string) ([]byte, error) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Unsubscribe, Qos: 1}}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	ack, err := c.subscription(pk, "UNSUBACK")
	if err != nil {
		return nil, err
	}
	if ack.FixedHeader.Type != packets.Unsuback {
		return nil, fmt.Errorf("mqtttest: got packet type %d for UNSUBSCRIBE", ack.FixedHeader.Type)
	}
	return ack.ReasonCodes, nil
}

// subscription sends a SUBSCRIBE or UNSUBSCRIBE under a new packet id and
// waits for its acknowledgement, named ackName in errors.
func (c *Client) subscription(pk packets.Packet, ackName string) (packets.Packet, error) {
	c.mu.Lock()
	pk.PacketID = c.newPacketID()
	c.mu.Unlock()
	if err := c.write(pk); err != nil {
		return packets.Packet{}, err
	}
	select {
	case ack := <-c.subacks:
		return ack, nil
	case <-c.Done:
		return packets.Packet{}, fmt.Errorf("mqtttest: closed before %s", ackName)
	case <-time.After(10 * time.Second):
		return packets.Packet{}, fmt.Errorf("mqtttest: %s timeout", ackName)
	}
}

// newPacketID is the next packet id, never 0 (c.mu held).
func (c *Client) newPacketID() uint16 {
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// awaitAck gives pk a new packet id and registers the channel its PUBACK
// will come on.
func (c *Client) awaitAck(pk *packets.Packet) chan packets.Packet {
	c.mu.Lock()
	defer c.mu.Unlock()
	pk.PacketID = c.newPacketID()
	w := make(chan packets.Packet, 1)
	c.waiters[pk.PacketID] = w
	return w
}

// DisconnectWith sends a DISCONNECT with these v5 properties (a new
// session expiry, say), then closes.
func (c *Client) DisconnectWith(p packets.Properties) {
	c.handMu.Lock()
	defer c.handMu.Unlock()
	_ = c.write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, Properties: p})
	c.Drop()
}

// Disconnect sends DISCONNECT and closes.
func (c *Client) Disconnect() {
	c.handMu.Lock()
	defer c.handMu.Unlock()
	_ = c.write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}})
	c.Drop()
}

// Drop closes the TCP connection without DISCONNECT (a lost network). The
// read loop ends even if nobody drains Publishes any more.
func (c *Client) Drop() {
	c.closeOnce.Do(func() { close(c.closing) })
	c.conn.Close()
}

// Closed reports whether the server closed the connection.
func (c *Client) Closed() bool {
	select {
	case <-c.Done:
		return true
	default:
		return false
	}
}
