package broker

import (
	"github.com/gorilla/websocket"
	"log/slog"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// closer is the part of listeners.Listener that Shutdown relies on.
type closer interface {
	Init(*slog.Logger) error
	Close(listeners.CloseFn)
}

// mochi's Server.Close closes every listener again after Broker.Shutdown
// has closed them and disconnected the clients; its closeListenerClients
// can deadlock against disconnecting clients, so a second Close must not
// call it.
func TestListenerClosesItsClientsOnlyOnTheFirstClose(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for name, l := range map[string]closer{
		"tcp":       NewTCPListener("t", "127.0.0.1:0", nil, log),
		"websocket": NewWSListener("w", nil, log),
	} {
		if err := l.Init(log); err != nil {
			t.Fatalf("%s: init: %v", name, err)
		}
		calls := 0
		count := func(string) { calls++ }
		l.Close(count)
		l.Close(count)
		l.Close(count)
		if calls != 1 {
			t.Fatalf("%s: closeClients called %d times, want once", name, calls)
		}
	}
}

func TestClosedTCPListenerDoesNotBindAgain(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	l := NewTCPListener("t", "127.0.0.1:0", nil, log)
	l.Close(func(string) {})
	if err := l.Init(log); err == nil {
		t.Fatal("Init after Close bound a socket")
	}
}

// TestClientsConnectingWhileTheServerClosesAreCountedFirst: mochi counts
// each connection it attaches in Listeners.ClientsWg and Server.Close
// waits on it; a connection arriving while the server closes made that
// count start from zero concurrently with the Wait (a misuse of
// sync.WaitGroup the race detector reports; seen in CI when a client
// reconnected as a test's node shut down). Run with -race.
func TestClientsConnectingWhileTheServerClosesAreCountedFirst(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for range 20 {
		srv := mqtt.New(&mqtt.Options{Logger: log})
		if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
			t.Fatal(err)
		}
		l := NewTCPListener("t", "127.0.0.1:0", nil, log)
		l.clients = &srv.Listeners.ClientsWg
		if err := srv.AddListener(l); err != nil {
			t.Fatal(err)
		}
		if err := srv.Serve(); err != nil {
			t.Fatal(err)
		}
		addr := l.Address()
		var dials atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if c, err := net.Dial("tcp", addr); err == nil {
						dials.Add(1)
						_ = c.Close()
					}
				}
			}()
		}
		for deadline := time.Now().Add(5 * time.Second); dials.Load() < 50; {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections in 5 s", dials.Load())
			}
			runtime.Gosched()
		}
		l.Close(func(string) {})
		_ = srv.Close()
		close(stop)
		wg.Wait()
	}
}

// mochi's Server.Serve starts each listener's Serve on a goroutine of its
// own and returns, and chatd's HTTP server starts right after it: a
// WebSocket CONNECT arriving in between was refused with 503 (seen in CI
// as a test's first connect failing with "bad handshake"). It waits for
// the listener instead.
func TestWebSocketConnectRightAfterServeIsAccepted(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for i := range 100 {
		srv := mqtt.New(&mqtt.Options{Logger: log})
		if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
			t.Fatal(err)
		}
		l := NewWSListener("w", nil, log)
		l.clients = &srv.Listeners.ClientsWg
		if err := srv.AddListener(l); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(l)
		if err := srv.Serve(); err != nil {
			t.Fatal(err)
		}
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
		ws, resp, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/mqtt", nil)
		if err != nil {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Fatalf("connect %d right after Serve: %v (HTTP %d)", i, err, status)
		}
		_ = ws.Close()
		_ = srv.Close()
		hs.Close()
	}
}

// A WebSocket CONNECT to a node whose listener has closed (it is shutting
// down) is refused with 503 and a Retry-After, as every 503 of the HTTP
// port says when to come back.
func TestAWebSocketConnectToAClosedListenerIsToldWhenToRetry(t *testing.T) {
	l := NewWSListener("w", nil, slog.New(slog.DiscardHandler))
	l.Close(func(string) {})
	rec := httptest.NewRecorder()
	l.ServeHTTP(rec, httptest.NewRequest("GET", "/mqtt", nil))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("CONNECT to a closed listener: %d, Retry-After %q; want 503 with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"))
	}
}
