package broker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/testkit"
)

// benchConnect is a CONNECT as chatd's clients send it on a reconnect:
// MQTT 5, a session expiry, Request Problem Information, a client id, a
// user id and a JWT of ~900 bytes as the password.
func benchConnect(clientID string) []byte {
	props := []byte{0x11, 0, 0, 0x0e, 0x10, 0x17, 1, 0x21, 0, 64}
	body := append(mqttStr("MQTT"), 5, 0xc0, 0, 60, byte(len(props)))
	body = append(body, props...)
	body = append(body, mqttStr(clientID)...)
	body = append(body, mqttStr("123456")...)
	tok := make([]byte, 900)
	for i := range tok {
		tok[i] = 'a' + byte(i%26)
	}
	body = append(body, mqttStr(string(tok))...)
	return mqttPacket(0x10, body)
}

// replayConn gives its bytes once, as the network gives them (cut bytes
// a read at most).
type replayConn struct {
	net.Conn
	rest []byte
	cut  int
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.cut)], c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// BenchmarkConnectRead is what reading one CONNECT costs on the
// connection's goroutine, as mochi reads it (a 512-byte bufio.Reader over
// the broker's connection, the fixed header, the body, its copy, its
// decoding), and the chat hook's taking of the body the broker kept;
// cpu-ns/op is the process's CPU time (GC included) per CONNECT, steadier
// than ns/op on a shared machine.
func BenchmarkConnectRead(b *testing.B) {
	connect := benchConnect("0123456789abcdef0123456789abcdef")
	for _, cut := range []int{1 << 16, 1460} {
		b.Run(fmt.Sprintf("read=%d", cut), func(b *testing.B) {
			b.ReportAllocs()
			rc := &replayConn{cut: cut}
			cpu0 := cpuTime()
			for b.Loop() {
				rc.rest = connect
				c := &connectCapped{Conn: rc}
				br := bufio.NewReaderSize(c, ReadBufferSize)
				t, _ := br.ReadByte()
				fh := packets.FixedHeader{}
				if err := fh.Decode(t); err != nil {
					b.Fatal(err)
				}
				n, _, err := packets.DecodeLength(br)
				if err != nil {
					b.Fatal(err)
				}
				fh.Remaining = n
				p := make([]byte, n)
				if _, err := io.ReadFull(br, p); err != nil {
					b.Fatal(err)
				}
				pk := packets.Packet{FixedHeader: fh}
				if err := pk.ConnectDecode(append([]byte{}, p...)); err != nil {
					b.Fatal(err)
				}
				if k, ok := any(c).(interface{ ConnectPacket() []byte }); ok && k.ConnectPacket() == nil {
					b.Fatal("no CONNECT kept")
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// takeConnectHook takes the CONNECT's body the broker's connection kept,
// where the chat hook does, and nothing else.
type takeConnectHook struct{ mqtt.HookBase }

func (h *takeConnectHook) ID() string { return "take-connect" }

func (h *takeConnectHook) Provides(b byte) bool { return b == mqtt.OnPacketRead }

func (h *takeConnectHook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if c, ok := cl.Net.Conn.(interface{ ConnectPacket() []byte }); ok && pk.FixedHeader.Type == packets.Connect {
		_ = c.ConnectPacket()
	}
	return pk, nil
}

// BenchmarkConnectsOverLoopback is a reconnect storm against mochi behind
// the broker's TCP listener, without the chat hook's work (what the
// listener's connection adds; takeConnectHook takes the CONNECT's copy as
// the chat hook does): workers dialling from 127.0.0.1-8, each a CONNECT,
// its CONNACK, a DISCONNECT. It reports connects/s and the process's CPU
// time per connect (client side included).
func BenchmarkConnectsOverLoopback(b *testing.B) {
	srv, log := allowingServer(b)
	if err := srv.AddHook(new(takeConnectHook), nil); err != nil {
		b.Fatal(err)
	}
	l := NewTCPListener("t", "127.0.0.1:0", nil, log)
	l.pending = newPendingConnects(0, nil)
	if err := srv.AddListener(l); err != nil {
		b.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	addr := l.Address()
	const workers = 16
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+w%8))}}
			buf := make([]byte, 64)
			for next.Add(1) <= int64(b.N) {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(benchConnect(fmt.Sprintf("bench-%d-%d", w, next.Load()))); err != nil {
					b.Error(err)
				}
				if _, err := io.ReadAtLeast(c, buf, 4); err != nil || buf[0] != 0x20 || buf[3] != 0 {
					b.Errorf("CONNACK % x (%v)", buf[:4], err)
				}
				_, _ = c.Write([]byte{0xe0, 0})
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "connects/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/connect")
}

// cpuTime is the CPU time the process used so far, user and system: on
// a machine shared with other work it varies far less than wall time.
func cpuTime() time.Duration {
	d, _ := testkit.ProcessCPU()
	return d
}
