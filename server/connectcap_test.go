package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/broker"
	"github.com/chatd/chatd/internal/mqttwire"
	"github.com/chatd/chatd/internal/pgtest"
)

// The Maximum Packet Size grows with the body limit, but a CONNECT is read
// before the client is authenticated, and mochi allocates a packet's
// announced length as soon as its fixed header arrives: a first packet
// announcing more than broker.MaxConnectSize ends the connection at once,
// instead of holding that much memory until the connect timeout. One
// announcing less is waited for as before.
func TestAConnectAnnouncingMoreThanTheConnectLimitIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	for _, tc := range []struct {
		name   string
		size   int
		closed bool
	}{
		{"over the limit", broker.MaxConnectSize + 1, true},
		{"within it", broker.MaxConnectSize, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.MQTTAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hdr := []byte{0x10} // CONNECT
			for n := tc.size; ; {
				b := byte(n & 0x7f)
				if n >>= 7; n > 0 {
					hdr = append(hdr, b|0x80)
					continue
				}
				hdr = append(hdr, b)
				break
			}
			if _, err := conn.Write(hdr); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = conn.Read(make([]byte, 16))
			timedOut := errors.Is(err, os.ErrDeadlineExceeded)
			if tc.closed && timedOut {
				t.Fatalf("a CONNECT announcing %d bytes is still waited for after 2 s", tc.size)
			}
			if !tc.closed && !timedOut {
				t.Fatalf("a CONNECT announcing %d bytes was not waited for: %v", tc.size, err)
			}
		})
	}
}

// A CONNECT over the connect limit is refused before it is read, so
// chatd cannot say which rule it broke from its contents; but its first
// bytes name its protocol, and MQTT 5 has a code for it: CONNACK 0x95
// packet too large, a final answer (the token or client id is too long),
// where a connection closed without a word looks like a network failure
// to retry. MQTT 3.1.1 has no such code: its connection is closed without
// a CONNACK.
func TestAnMQTT5ConnectOverTheConnectLimitIsToldItIsTooLarge(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	// A token and a user name of 35,000 bytes each: well formed, over
	// the limit together.
	huge := strings.Repeat("x", broker.MaxConnectSize/2+2000)
	for _, c := range []struct {
		version byte
		want    string
	}{
		{5, "CONNACK 0x95"},
		{4, "closed"},
	} {
		conn, err := net.Dial("tcp", srv.MQTTAddr())
		if err != nil {
			t.Fatal(err)
		}
		b, err := mqttwire.Encode(mqttwire.Connect(c.version, mqttwire.Login{ClientID: "huge", Username: huge, Password: huge, Clean: true, Keepalive: 30}))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write(b) // a 3.1.1 one may be reset before it is all written
		got := "closed"
		if ack, err := mqttwire.Read(bufio.NewReader(conn), c.version); err == nil {
			got = fmt.Sprintf("packet type %d", ack.FixedHeader.Type)
			if ack.FixedHeader.Type == packets.Connack {
				got = fmt.Sprintf("CONNACK 0x%02x", ack.ReasonCode)
			}
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			got = "no answer within 10 s"
		}
		conn.Close()
		if got != c.want {
			t.Errorf("v%d CONNECT of %d bytes: %s, want %s", c.version, len(b), got, c.want)
		}
	}
}
