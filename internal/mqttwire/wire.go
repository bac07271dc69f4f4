// Package mqttwire is the MQTT 3.1.1/5 wire work shared by chatd's raw
// clients, the tests' (internal/mqtttest) and the load generators'
// (internal/benchmqtt): encoding and reading packets with mochi's codec,
// and the CONNECT/CONNACK handshake. Both clients need control no library
// client gives (exact reason codes, v3.1.1, not acknowledging), and the
// codec is independent of the server's hooks.
package mqttwire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// codecs are mochi's encoder of each packet type a client sends and
// decoder of each type with a body it reads.
var codecs = map[byte]struct {
	encode func(*packets.Packet, *bytes.Buffer) error
	decode func(*packets.Packet, []byte) error
}{
	packets.Connect:     {encode: (*packets.Packet).ConnectEncode},
	packets.Connack:     {decode: (*packets.Packet).ConnackDecode},
	packets.Publish:     {encode: (*packets.Packet).PublishEncode, decode: (*packets.Packet).PublishDecode},
	packets.Puback:      {encode: (*packets.Packet).PubackEncode, decode: (*packets.Packet).PubackDecode},
	packets.Subscribe:   {encode: (*packets.Packet).SubscribeEncode},
	packets.Suback:      {decode: (*packets.Packet).SubackDecode},
	packets.Unsubscribe: {encode: (*packets.Packet).UnsubscribeEncode},
	packets.Unsuback:    {decode: (*packets.Packet).UnsubackDecode},
	packets.Pingreq:     {encode: (*packets.Packet).PingreqEncode},
	packets.Disconnect:  {encode: (*packets.Packet).DisconnectEncode, decode: (*packets.Packet).DisconnectDecode},
	packets.Auth:        {encode: (*packets.Packet).AuthEncode, decode: (*packets.Packet).AuthDecode},
}

// Encode encodes a packet a client sends, at pk.ProtocolVersion.
func Encode(pk packets.Packet) ([]byte, error) {
	enc := codecs[pk.FixedHeader.Type].encode
	if enc == nil {
		return nil, fmt.Errorf("mqttwire: cannot encode packet type %d", pk.FixedHeader.Type)
	}
	var buf bytes.Buffer
	err := enc(&pk, &buf)
	return buf.Bytes(), err
}

// Read reads one packet a server sends and decodes it at version. A
// packet of a type a client does not decode (PINGRESP) comes back with
// its fixed header only.
func Read(r *bufio.Reader, version byte) (packets.Packet, error) {
	hb, err := r.ReadByte()
	if err != nil {
		return packets.Packet{}, err
	}
	var fh packets.FixedHeader
	if err := fh.Decode(hb); err != nil {
		return packets.Packet{}, err
	}
	n, _, err := packets.DecodeLength(r)
	if err != nil {
		return packets.Packet{}, err
	}
	fh.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return packets.Packet{}, err
	}
	pk := packets.Packet{FixedHeader: fh, ProtocolVersion: version}
	if dec := codecs[fh.Type].decode; dec != nil {
		err = dec(&pk, body)
	}
	return pk, err
}

// Login is what a CONNECT says about the client and its session.
type Login struct {
	ClientID           string
	Username, Password string // empty: none
	Clean              bool
	Keepalive          uint16
	Expiry             uint32 // v5 session expiry interval, seconds
	// Properties are extra v5 CONNECT properties (Receive Maximum, Topic
	// Alias Maximum, ...); Expiry still sets the session expiry.
	Properties packets.Properties
}

// Connect is the CONNECT packet of l at version (4 or 5).
func Connect(version byte, l Login) packets.Packet {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: version,
		Connect: packets.ConnectParams{
			ProtocolName:     []byte("MQTT"),
			Clean:            l.Clean,
			Keepalive:        l.Keepalive,
			ClientIdentifier: l.ClientID,
			UsernameFlag:     l.Username != "",
			Username:         []byte(l.Username),
			PasswordFlag:     l.Password != "",
			Password:         []byte(l.Password),
		},
	}
	if version == 5 {
		pk.Properties = l.Properties
		pk.Properties.SessionExpiryInterval = l.Expiry
		pk.Properties.SessionExpiryIntervalFlag = l.Expiry > 0
	}
	return pk
}

// Handshake sends connect on conn and reads the CONNACK from r (reading
// conn), both within timeout, and returns it when it accepts. On any
// failure it closes conn; a refusal is an error that comes with its
// CONNACK.
func Handshake(conn net.Conn, r *bufio.Reader, connect packets.Packet, timeout time.Duration) (packets.Packet, error) {
	ack, err := handshake(conn, r, connect, timeout)
	if err != nil {
		conn.Close()
	}
	return ack, err
}

func handshake(conn net.Conn, r *bufio.Reader, connect packets.Packet, timeout time.Duration) (packets.Packet, error) {
	b, err := Encode(connect)
	if err != nil {
		return packets.Packet{}, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write(b); err != nil {
		return packets.Packet{}, fmt.Errorf("write CONNECT: %w", err)
	}
	ack, err := Read(r, connect.ProtocolVersion)
	switch {
	case err != nil:
		return packets.Packet{}, fmt.Errorf("read CONNACK: %w", err)
	case ack.FixedHeader.Type != packets.Connack:
		return ack, fmt.Errorf("expected CONNACK, got packet type %d", ack.FixedHeader.Type)
	case ack.ReasonCode != 0:
		return ack, fmt.Errorf("connect refused with reason 0x%02x", ack.ReasonCode)
	}
	return ack, nil
}
