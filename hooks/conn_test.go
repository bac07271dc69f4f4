package hooks

import (
	"bytes"
	"io"
	"net"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"

	chat "github.com/chatd/chatd"
)

// TestALargeWritesBufferIsNotPooled: the buffer one large publish grew
// is not handed to later writes through bufPool.
func TestALargeWritesBufferIsNotPooled(t *testing.T) {
	srv := mqtt.New(nil)
	ours, theirs := net.Pipe()
	defer ours.Close()
	defer theirs.Close()
	go func() { _, _ = io.Copy(io.Discard, theirs) }()
	cl := srv.NewClient(ours, "test", "c1", false)
	cl.Properties.ProtocolVersion = 5
	for range 10 {
		p := chat.Packet{Topic: "a/b", Payload: bytes.Repeat([]byte{'x'}, 4*maxPooledBuf), QoS: 1, PacketID: 1}
		if err := (&mqttConn{cl: cl}).Write(nil, []chat.Packet{p}); err != nil {
			t.Fatal(err)
		}
		buf := bufPool.Get().(*bytes.Buffer)
		if buf.Cap() > maxPooledBuf {
			t.Fatalf("a buffer of %d bytes came back from the pool after a large write, want at most %d", buf.Cap(), maxPooledBuf)
		}
	}
}
