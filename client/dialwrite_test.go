package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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
