package broker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// sinkConn is the accepted side of a connection whose peer sent nothing
// more and reads whatever is written: what connectCapped's answer to an
// oversize CONNECT writes and drains, without a second of real waiting.
type sinkConn struct {
	net.Conn
	wrote bytes.Buffer
}

func (c *sinkConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *sinkConn) Write(p []byte) (int, error)      { return c.wrote.Write(p) }
func (c *sinkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sinkConn) SetWriteDeadline(time.Time) error { return nil }

// However a connection's first bytes come (split across reads anywhere,
// the remaining length's bytes one by one among them), connectCapped
// refuses the first packet exactly when the remaining length its fixed
// header announces, read as mochi reads it, is over MaxConnectSize, never
// panics, and stops looking once the length is known.
func FuzzConnectCapSeesTheLengthHoweverTheBytesArrive(f *testing.F) {
	f.Add([]byte{0x10, 0x80, 0x80, 0x04, 0, 4, 'M', 'Q', 'T', 'T', 5}, []byte{1, 1, 1, 1})
	f.Add([]byte{0x10, 0xff, 0xff, 0x03, 0, 4, 'M', 'Q', 'T', 'T', 5}, []byte{2, 9})
	f.Add([]byte{0x10, 0x80, 0x80, 0x80, 0x80, 0x01}, []byte{3})
	f.Add([]byte{0x10, 0x0c, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 30, 0, 0}, []byte{})
	f.Add([]byte{0x30, 0x81, 0x80, 0x05}, []byte{1})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		if len(stream) == 0 {
			return
		}
		// mochi's reading of the whole fixed header.
		fh := bytes.NewReader(stream[1:])
		length, _, lerr := packets.DecodeLength(fh)
		headerDone := lerr == nil || len(stream) >= 5 // four length bytes read, or the length ended
		wantRefused := (lerr == nil && length > MaxConnectSize) || (lerr != nil && len(stream) >= 5 && lenOf(stream[1:5]) > MaxConnectSize)

		conn := &sinkConn{}
		c := &connectCapped{Conn: conn}
		var refused error
		for rest := stream; len(rest) > 0 && refused == nil && !c.checked; {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(n, 1+int(cuts[0]%8))
				cuts = cuts[1:]
			}
			refused = c.check(rest[:n])
			rest = rest[n:]
		}
		if refused != nil && !errors.Is(refused, errConnectTooLarge) {
			t.Fatalf("refused with %v", refused)
		}
		if (refused != nil) != wantRefused {
			t.Fatalf("% x: refused %v, want %v (mochi reads length %d, %v)", stream, refused, wantRefused, length, lerr)
		}
		if headerDone != c.checked {
			t.Fatalf("% x: checked %v, want %v", stream, c.checked, headerDone)
		}
		if w := conn.wrote.Bytes(); len(w) > 0 && (!bytes.Equal(w, connackTooLarge) || refused == nil) {
			t.Fatalf("% x: wrote % x (refused %v)", stream, w, refused)
		}
	})
}

// lenOf is the value of up to four remaining length bytes taken as they
// are, continuation bits and all: a fifth would be needed, and the
// length is at least this.
func lenOf(b []byte) int {
	v, mul := 0, 0
	for _, x := range b {
		v += int(x&0x7f) << mul
		mul += 7
	}
	return v
}
