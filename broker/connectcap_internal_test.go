package broker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

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
			_, refused = c.check(rest[:n])
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

// chunkConn gives what it holds a few bytes a read, as a slow network
// would.
type chunkConn struct {
	net.Conn
	rest []byte
	cut  int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.cut)], c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// The hook reads what mochi's decoding of a CONNECT forgets (a property
// sent with the value 0, one sent twice) from the CONNECT's own bytes:
// connectCapped keeps the first packet's body, whatever reads it arrives
// in, only once it is whole, only when it is a CONNECT, never a byte of
// the packets after it, and gives it up once taken.
func TestConnectCappedKeepsTheConnectsBodyForTheHook(t *testing.T) {
	body := []byte{0, 4, 'M', 'Q', 'T', 'T', 5, 2, 0, 30, 3, 0x21, 0, 0, 0, 1, 'c'}
	connect := append([]byte{0x10, byte(len(body))}, body...)
	subscribe := []byte{0x82, 6, 0, 1, 0, 1, 't', 0}
	for cut := 1; cut <= len(connect)+len(subscribe); cut++ {
		c := &connectCapped{Conn: &chunkConn{rest: append(append([]byte{}, connect...), subscribe...), cut: cut}}
		var read []byte
		buf := make([]byte, 64)
		for {
			if got := c.ConnectPacket(); got != nil {
				if len(read) < len(connect) {
					t.Fatalf("cut %d: the body given after %d bytes of %d", cut, len(read), len(connect))
				}
				if !bytes.Equal(got, body) {
					t.Fatalf("cut %d: kept % x, want % x", cut, got, body)
				}
				if again := c.ConnectPacket(); again != nil {
					t.Fatalf("cut %d: given twice", cut)
				}
				break
			}
			n, err := c.Read(buf)
			read = append(read, buf[:n]...)
			if err != nil {
				t.Fatalf("cut %d: the body never given (read % x)", cut, read)
			}
		}
	}
	// Another packet first: nothing kept.
	c := &connectCapped{Conn: &chunkConn{rest: subscribe, cut: 64}}
	if _, err := c.Read(make([]byte, 64)); err != nil || c.ConnectPacket() != nil || c.connect != nil {
		t.Fatalf("a SUBSCRIBE first: kept % x (%v)", c.connect, err)
	}
}

// A peer announcing a CONNECT of MaxConnectSize and sending a little of
// it makes the broker keep no more than a chunk for it (mochi holds the
// announced size already), where a CONNECT of the usual size is kept in
// the one allocation.
func TestAStalledConnectIsKeptNoLargerThanItsChunk(t *testing.T) {
	hdr := []byte{0x10, 0x80, 0x80, 0x04} // 65536 bytes announced
	c := &connectCapped{Conn: &chunkConn{rest: append(hdr, make([]byte, 100)...), cut: 1 << 20}}
	if _, err := c.Read(make([]byte, 512)); err != nil {
		t.Fatal(err)
	}
	if len(c.connect) != 100 || cap(c.connect) > keepChunk {
		t.Fatalf("100 bytes of a CONNECT announcing %d kept in %d bytes (%d of them): want %d at most", MaxConnectSize, cap(c.connect), len(c.connect), keepChunk)
	}
	if c.ConnectPacket() != nil {
		t.Fatal("a CONNECT cut short given to the hook")
	}
}

// The reason string of CONNACK 0x81 is an MQTT 5 UTF-8 string whatever
// mochi's reason holds: valid UTF-8, no U+0000 [MQTT-1.5.4-1]
// [MQTT-1.5.4-2] (a client closes the connection on either, and never
// reads the answer), no control characters, at most maxReason bytes, and
// it says malformed packet.
func TestTheMalformedReasonIsAValidMQTTString(t *testing.T) {
	for _, why := range []string{
		"client id \x00\x01\x1b[31m\xff\xfe\u2028 bad\r\n",
		strings.Repeat("é", 300),
		packets.ErrMalformedPacket.Reason + ": properties",
	} {
		got := malformedReason(errors.New(why))
		if !utf8.ValidString(got) || len(got) > maxReason || !strings.HasPrefix(got, packets.ErrMalformedPacket.Reason) {
			t.Errorf("%q: reason %q", why, got)
		}
		for _, r := range got {
			if r == 0 || unicode.IsControl(r) || !unicode.IsPrint(r) {
				t.Errorf("%q: reason %q holds %U", why, got, r)
			}
		}
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ProtocolVersion: 5,
			ReasonCode: packets.ErrMalformedPacket.Code, Properties: packets.Properties{ReasonString: got}}
		var buf bytes.Buffer
		if err := pk.ConnackEncode(&buf); err != nil {
			t.Fatalf("%q: encode: %v", why, err)
		}
		r := bytes.NewReader(buf.Bytes()[1:])
		n, _, err := packets.DecodeLength(r)
		if err != nil || n != r.Len() {
			t.Fatalf("%q: CONNACK % x", why, buf.Bytes())
		}
		back := packets.Packet{ProtocolVersion: 5, FixedHeader: packets.FixedHeader{Type: packets.Connack, Remaining: n}}
		if err := back.ConnackDecode(buf.Bytes()[buf.Len()-n:]); err != nil || back.Properties.ReasonString != got {
			t.Errorf("%q: the CONNACK reads back as %q (%v)", why, back.Properties.ReasonString, err)
		}
	}
	if got := malformedReason(errors.New("property type 35 not valid for packet type 1")); got != "malformed packet: property type 35 not valid for packet type 1" {
		t.Errorf("mochi's reason became %q", got)
	}
}
