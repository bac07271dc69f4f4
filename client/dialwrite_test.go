package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/gorilla/websocket"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/wsstream"
)

// paho writes a packet as several writes (fixed header, length,
// properties, payload) from whichever goroutine publishes, acknowledges
// or pings. Over the connection the client dials, publishes made from
// many goroutines at once reach the server whole, each one's bytes
// together, over TCP and WebSocket alike.
func TestPacketsPublishedFromManyGoroutinesAtOnceReachTheServerWhole(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"mqtt", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			const goroutines, each = 8, 500
			var whole, broken atomic.Int64
			var firstErr atomic.Pointer[string]
			serve := func(conn net.Conn) {
				defer conn.Close()
				if pk, err := packets.ReadPacket(conn); err != nil || pk.Type != packets.CONNECT {
					t.Errorf("the first packet is not a CONNECT: %v", err)
					return
				}
				ack := packets.NewControlPacket(packets.CONNACK)
				if _, err := ack.WriteTo(conn); err != nil {
					t.Errorf("write CONNACK: %v", err)
					return
				}
				for {
					pk, err := packets.ReadPacket(conn)
					if err != nil {
						return
					}
					p, ok := pk.Content.(*packets.Publish)
					var g int
					if ok {
						_, err = fmt.Sscanf(p.Topic, "t/%d", &g)
					}
					if !ok || err != nil || !bytes.Equal(p.Payload, payloadOf(g)) {
						broken.Add(1)
						msg := fmt.Sprintf("packet type %d", pk.Type)
						if ok {
							msg += fmt.Sprintf(", topic %q, %d bytes of payload", p.Topic, len(p.Payload))
						}
						firstErr.CompareAndSwap(nil, &msg)
						return // the stream is out of step: nothing after it reads
					}
					whole.Add(1)
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			broker := "mqtt://" + ln.Addr().String()
			if scheme == "ws" {
				up := websocket.Upgrader{Subprotocols: []string{"mqtt"}}
				hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ws, err := up.Upgrade(w, r, nil)
					if err != nil {
						return
					}
					serve(wsstream.New(ws))
				})}
				go hs.Serve(ln)
				t.Cleanup(func() { hs.Close() })
				broker = "ws://" + ln.Addr().String() + "/mqtt"
			} else {
				go func() {
					conn, err := ln.Accept()
					if err == nil {
						serve(conn)
					}
				}()
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := client.Dial(ctx, broker, nil)
			if err != nil {
				t.Fatal(err)
			}
			pc := paho.NewClient(paho.ClientConfig{Conn: conn})
			if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "writer", CleanStart: true}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						if _, err := pc.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("t/%d", g), Payload: payloadOf(g)}); err != nil {
							return // the connection ended: the count below says why
						}
					}
				}()
			}
			wg.Wait()
			testkit.WaitFor(t, 5*time.Second, "every publish read, or a broken one", func() bool {
				return whole.Load() == goroutines*each || broken.Load() > 0
			})
			if broken.Load() > 0 {
				t.Fatalf("after %d whole publishes the server read a broken one (%s): writes of concurrent publishes interleaved",
					whole.Load(), *firstErr.Load())
			}
		})
	}
}

// payloadOf is publisher g's payload, long enough for paho to write it
// apart from its header.
func payloadOf(g int) []byte { return []byte(strings.Repeat(string(rune('a'+g)), 300)) }

// The client reads the CONNACK on its way to paho, holding its bytes until
// the packet is whole. A first packet that is no CONNACK, or one that says
// it is longer than any CONNACK (up to 256 MB), is left to paho: the
// connection keeps no copy of what it reads of it.
func TestTheConnectionKeepsNoCopyOfAFirstPacketThatIsNoCONNACKOrLongerThanOne(t *testing.T) {
	t.Parallel()
	for name, header := range map[string][]byte{
		"a CONNACK saying 200 MB": {0x20, 0x80, 0x80, 0x80, 0x64},
		"a PUBLISH":               {0x30, 0x80, 0x80, 0x80, 0x64},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			const body = 1 << 20
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = conn.Write(append(append([]byte{}, header...), make([]byte, body)...))
				_, _ = conn.Read(make([]byte, 1)) // until the client closes
			}()
			conn, err := client.Dial(ctxFor(t, 10*time.Second), "mqtt://"+ln.Addr().String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.CopyN(io.Discard, conn, int64(len(header)+body)); err != nil {
				t.Fatal(err)
			}
			if n := client.ConnackBuffered(conn); n > 0 {
				t.Fatalf("after reading %d bytes of %s, the connection holds %d bytes of it", len(header)+body, name, n)
			}
		})
	}
}

// writeLog is a connection's end that notes each write reaching it, and
// fails them once fail is set.
type writeLog struct {
	net.Conn
	fail   atomic.Bool
	mu     sync.Mutex
	writes [][]byte
}

var errWriteRefused = errors.New("write refused")

func (w *writeLog) Write(p []byte) (int, error) {
	if w.fail.Load() {
		return 0, errWriteRefused
	}
	w.mu.Lock()
	w.writes = append(w.writes, bytes.Clone(p))
	w.mu.Unlock()
	return w.Conn.Write(p)
}

func (w *writeLog) log() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// onePacketEach fails t unless each chunk holds exactly one whole packet,
// and returns their types.
func onePacketEach(t *testing.T, what string, chunks [][]byte) []byte {
	t.Helper()
	var types []byte
	for i, b := range chunks {
		r := bytes.NewReader(b)
		pk, err := packets.ReadPacket(r)
		if err != nil || r.Len() > 0 {
			t.Fatalf("%s %d of %d (%d bytes) is not one whole packet (%v, %d bytes left): a packet goes out in several",
				what, i+1, len(chunks), len(b), err, r.Len())
		}
		types = append(types, pk.Type)
	}
	return types
}

// acceptMQTT answers a CONNECT read from conn, then reads packets until the
// connection ends.
func acceptMQTT(t *testing.T, conn net.Conn) {
	defer conn.Close()
	if pk, err := packets.ReadPacket(conn); err != nil || pk.Type != packets.CONNECT {
		t.Errorf("the first packet is not a CONNECT: %v", err)
		return
	}
	if _, err := packets.NewControlPacket(packets.CONNACK).WriteTo(conn); err != nil {
		t.Errorf("write CONNACK: %v", err)
		return
	}
	for {
		if _, err := packets.ReadPacket(conn); err != nil {
			return
		}
	}
}

// paho writes a packet as several writes; the connection the client dials
// hands each packet to the connection under it in one write: one TCP
// segment (as the writev of a bare TCP connection), one WebSocket
// message, one TLS record. A write outside paho's lock goes out at once,
// and a failed write of a packet is paho's error.
func TestEachPacketPahoWritesReachesTheConnectionInOneWrite(t *testing.T) {
	t.Parallel()
	publish := func(ctx context.Context, t *testing.T, pc *paho.Client) {
		t.Helper()
		for g := range 3 {
			p := &paho.Publish{Topic: fmt.Sprintf("t/%d", g), Payload: payloadOf(g),
				Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "k", Value: "v"}}}}
			if _, err := pc.Publish(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("counted writes", func(t *testing.T) {
		mine, theirs := net.Pipe()
		go acceptMQTT(t, theirs)
		under := &writeLog{Conn: mine}
		conn := client.WrapConn(under)
		t.Cleanup(func() { conn.Close() })
		ctx := ctxFor(t, 10*time.Second)
		pc := paho.NewClient(paho.ClientConfig{Conn: conn})
		if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "writer", CleanStart: true}); err != nil {
			t.Fatal(err)
		}
		publish(ctx, t, pc)
		types := onePacketEach(t, "write", under.log())
		if want := []byte{packets.CONNECT, packets.PUBLISH, packets.PUBLISH, packets.PUBLISH}; !bytes.Equal(types, want) {
			t.Fatalf("writes carried packets of types %v, want %v", types, want)
		}

		// Outside paho's lock a write goes out at once, as it is.
		raw := []byte{packets.PINGREQ << 4, 0}
		if n, err := conn.Write(raw[:1]); err != nil || n != 1 {
			t.Fatalf("write outside the lock: %d, %v", n, err)
		}
		if w := under.log(); !bytes.Equal(w[len(w)-1], raw[:1]) {
			t.Fatalf("a write outside the lock did not reach the connection at once: last write %v", w[len(w)-1])
		}
		if _, err := conn.Write(raw[1:]); err != nil {
			t.Fatal(err)
		}

		under.fail.Store(true)
		if _, err := pc.Publish(ctx, &paho.Publish{Topic: "t/0", Payload: payloadOf(0)}); !errors.Is(err, errWriteRefused) {
			t.Fatalf("publish over a connection whose write fails: %v, want %v", err, errWriteRefused)
		}
	})

	t.Run("websocket messages", func(t *testing.T) {
		var mu sync.Mutex
		var msgs [][]byte
		up := websocket.Upgrader{Subprotocols: []string{"mqtt"}}
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			for {
				_, b, err := ws.ReadMessage()
				if err != nil {
					return
				}
				mu.Lock()
				first := len(msgs) == 0
				msgs = append(msgs, b)
				mu.Unlock()
				if first {
					var ack bytes.Buffer
					_, _ = packets.NewControlPacket(packets.CONNACK).WriteTo(&ack)
					if err := ws.WriteMessage(websocket.BinaryMessage, ack.Bytes()); err != nil {
						return
					}
				}
			}
		}))
		t.Cleanup(hs.Close)
		ctx := ctxFor(t, 10*time.Second)
		conn, err := client.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/mqtt", nil)
		if err != nil {
			t.Fatal(err)
		}
		pc := paho.NewClient(paho.ClientConfig{Conn: conn})
		t.Cleanup(func() { conn.Close() })
		if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "writer", CleanStart: true}); err != nil {
			t.Fatal(err)
		}
		publish(ctx, t, pc)
		testkit.WaitFor(t, 5*time.Second, "4 messages", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(msgs) >= 4
		})
		mu.Lock()
		got := slices.Clone(msgs)
		mu.Unlock()
		onePacketEach(t, "message", got)
	})
}
