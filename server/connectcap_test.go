package server_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/chatd/chatd/broker"
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
