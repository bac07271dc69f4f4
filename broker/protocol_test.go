package broker

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// chatd speaks MQTT 3.1.1 and 5 (docs/protocol.md); a CONNECT of MQTT
// 3.1 (protocol name MQIsdp, level 3) is refused before anything else
// with CONNACK 0x01, unacceptable protocol version. mochi accepted it,
// and such a connection was served and counted under protocol "3.1",
// a value chat_mqtt_connections_by_transport does not document.
func TestAnMQTT31ConnectIsRefusedAsAnUnacceptableVersion(t *testing.T) {
	srv, log := allowingServer(t)
	l := NewTCPListener("t", "127.0.0.1:0", nil, log)
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	connack := func(name string, level byte) []byte {
		t.Helper()
		// CONNECT: protocol name, level, flags (clean session), keep
		// alive 30 s, client id "c".
		vh := append([]byte{0, byte(len(name))}, name...)
		vh = append(vh, level, 0x02, 0, 30, 0, 1, 'c')
		c := rawConnect(t, l.Address(), vh)
		defer c.Close()
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("%s %d: no CONNACK: %v", name, level, err)
		}
		return b
	}
	if b := connack("MQIsdp", 3); b[0] != 0x20 || b[3] != 0x01 {
		t.Fatalf("MQTT 3.1 CONNECT answered % x, want CONNACK 0x01 (unacceptable protocol version)", b)
	}
	if b := connack("MQTT", 4); b[0] != 0x20 || b[3] != 0x00 {
		t.Fatalf("MQTT 3.1.1 CONNECT answered % x, want CONNACK 0x00", b)
	}
}

// A CONNECT that cannot be read (here broken MQTT 5 properties, a client
// id that is not UTF-8) was closed without a word, which a device takes
// for a network failure and retries for ever. An MQTT 5 one now gets
// CONNACK 0x81 malformed packet with what could not be read as its reason
// string, before the close MQTT 5 asks for [MQTT-3.1.4-1]; MQTT 3.1.1 has
// no code for it and is closed without a CONNACK, as it wants.
func TestAnUnreadableV5ConnectIsAnsweredMalformedWithItsReason(t *testing.T) {
	srv, log := allowingServer(t)
	l := NewTCPListener("t", "127.0.0.1:0", nil, log)
	var unreadable, ended atomic.Int64
	l.pending = newPendingConnects(0, nil)
	l.pending.unreadable = func() { unreadable.Add(1) }
	l.ended = func(net.Conn) { ended.Add(1) }
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	// answer sends the CONNECT of body and returns what came back before
	// the server closed the connection (open: its first 4 bytes, the
	// connection left open).
	answer := func(body string, open ...bool) []byte {
		t.Helper()
		c := rawConnect(t, l.Address(), []byte(body))
		defer c.Close()
		if len(open) > 0 {
			got := make([]byte, 4)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("% x: no CONNACK: %v", body, err)
			}
			return got
		}
		got, err := io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("% x: not closed within 10 s (read % x)", body, got)
		}
		return got
	}
	for _, c := range []struct{ name, body, reason string }{
		{"v5 properties cut short", "\x00\x04MQTT\x05\x02\x00\x1e\x05\x21\x00\x00\x00", "properties"},
		{"v5 client id not UTF-8", "\x00\x04MQTT\x05\x02\x00\x1e\x00\x00\x02\xff\xfe", "client identifier"},
		{"v5 Topic Alias in a CONNECT", "\x00\x04MQTT\x05\x02\x00\x1e\x03\x23\x00\x01\x00\x01c", "properties"},
	} {
		before := unreadable.Load()
		got := answer(c.body)
		r := bytes.NewReader(got)
		typ, _ := r.ReadByte()
		n, _, err := packets.DecodeLength(r)
		if err != nil || typ != 0x20 || n != r.Len() || n < 2 || got[len(got)-n+1] != 0x81 {
			t.Errorf("%s: answered % x, want CONNACK 0x81 then the close", c.name, got)
			continue
		}
		pk := packets.Packet{ProtocolVersion: 5, FixedHeader: packets.FixedHeader{Type: packets.Connack, Remaining: n}}
		if err := pk.ConnackDecode(got[len(got)-n:]); err != nil || !strings.Contains(pk.Properties.ReasonString, c.reason) {
			t.Errorf("%s: CONNACK reason %q (%v), want one naming the %s", c.name, pk.Properties.ReasonString, err, c.reason)
		}
		if n := unreadable.Load() - before; n != 1 {
			t.Errorf("%s: counted %d times, want once", c.name, n)
		}
	}
	before := unreadable.Load()
	if got := answer("\x00\x04MQTT\x04\x02\x00\x1e\x00\x02\xff\xfe"); len(got) != 0 {
		t.Errorf("3.1.1 client id not UTF-8: answered % x, want the connection closed without a CONNACK", got)
	}
	if n := unreadable.Load() - before; n != 1 {
		t.Errorf("3.1.1 client id not UTF-8: counted %d times, want once", n)
	}
	// An empty CONNECT (remaining length 0) is one cut short too: its
	// level unknown, closed without a CONNACK, and counted.
	before = unreadable.Load()
	if got := answer(""); len(got) != 0 {
		t.Errorf("an empty CONNECT: answered % x, want the connection closed without a CONNACK", got)
	}
	if n := unreadable.Load() - before; n != 1 {
		t.Errorf("an empty CONNECT: counted %d times, want once", n)
	}
	// A readable one is answered by the server as ever, and not counted,
	// not even once its connection ended.
	before, endedBefore := unreadable.Load(), ended.Load()
	if got := answer("\x00\x04MQTT\x05\x02\x00\x1e\x03\x21\x00\x05\x00\x01c", true); len(got) < 4 || got[3] != 0 {
		t.Errorf("a readable v5 CONNECT: answered % x, want CONNACK 0x00", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ended.Load() == endedBefore; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not end the readable CONNECT's connection within 10 s of its close")
		}
	}
	if n := unreadable.Load() - before; n != 0 {
		t.Errorf("a readable v5 CONNECT counted as unreadable")
	}
}

// allowingServer is a mochi server with chatd's options (ServerOptions),
// logging nowhere, that lets every client in: the broker's own handling
// of connections is under test, not the chat hook's checks. log is its
// logger, for the listeners.
func allowingServer(tb testing.TB) (*mqtt.Server, *slog.Logger) {
	tb.Helper()
	log := slog.New(slog.DiscardHandler)
	opts := ServerOptions(chat.DefaultLimits())
	opts.Logger = log
	srv := mqtt.New(opts)
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		tb.Fatal(err)
	}
	return srv, log
}

// rawConnect dials addr over TCP, gives the connection 10 s for all it
// does, and sends a CONNECT of body (shorter than 128 bytes: its length
// one byte).
func rawConnect(t *testing.T, addr string, body []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}
