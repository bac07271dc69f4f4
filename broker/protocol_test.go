package broker

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"

	chat "github.com/chatd/chatd"
)

// chatd speaks MQTT 3.1.1 and 5 (docs/protocol.md); a CONNECT of MQTT
// 3.1 (protocol name MQIsdp, level 3) is refused before anything else
// with CONNACK 0x01, unacceptable protocol version. mochi accepted it,
// and such a connection was served and counted under protocol "3.1",
// a value chat_mqtt_connections_by_transport does not document.
func TestAnMQTT31ConnectIsRefusedAsAnUnacceptableVersion(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	opts := ServerOptions(chat.DefaultLimits())
	opts.Logger = log
	srv := mqtt.New(opts)
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
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
		c, err := net.Dial("tcp", l.Address())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		// CONNECT: protocol name, level, flags (clean session), keep
		// alive 30 s, client id "c".
		vh := append([]byte{0, byte(len(name))}, name...)
		vh = append(vh, level, 0x02, 0, 30, 0, 1, 'c')
		if _, err := c.Write(append([]byte{0x10, byte(len(vh))}, vh...)); err != nil {
			t.Fatal(err)
		}
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
