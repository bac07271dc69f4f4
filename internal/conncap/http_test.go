package conncap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// serveCapped serves mux on a loopback listener with the cap at max, as
// chatd's servers are wired (Listener, Handler, ConnState, ConnContext),
// and a 300 ms idle timeout.
func serveCapped(t *testing.T, max int, mux http.Handler) (*HTTP, *http.Server, string) {
	t.Helper()
	return serveCappedIdle(t, NewHTTP(max, nil, nil, nil), 300*time.Millisecond, mux)
}

// serveCappedIdle is serveCapped with h and an idle timeout of idle.
func serveCappedIdle(t *testing.T, h *HTTP, idle time.Duration, mux http.Handler) (*HTTP, *http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.Handler(mux), ConnState: h.ConnState, ConnContext: h.ConnContext,
		IdleTimeout: idle, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(h.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h, srv, ln.Addr().String()
}

func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// heldAtTheCap opens from ip a connection whose request (raw) runs in
// its handler, not counted, then max more connections from ip, idle,
// which fill its address's cap; it returns the request's connection.
func heldAtTheCap(t *testing.T, h *HTTP, max int, ip, addr, request string) net.Conn {
	t.Helper()
	conn := dialFrom(t, ip, addr)
	fmt.Fprint(conn, request)
	waitConns(t, h, ip, 0, 1) // its request running, not counted
	for range max {
		dialFrom(t, ip, addr)
	}
	waitConns(t, h, ip, max, max+1)
	return conn
}

// waitConns waits until ip's key has counted and tracked connections.
func waitConns(t *testing.T, h *HTTP, ip string, counted, tracked int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, tr := h.Conns(netip.MustParseAddr(ip))
		if c == counted && tr == tracked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d counted, %d tracked after 5 s, want %d, %d", ip, c, tr, counted, tracked)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closedBy reports whether the server closed c within d.
func closedBy(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Endings net/http brings about itself give a connection's slot back once,
// not twice: a handler's panic (before or after its header, and
// http.ErrAbortHandler), a hijack, the idle timeout closing a keep-alive
// connection. Counts never go below 0, so a slot given back twice shows
// only while other connections of the address count: max-1 silent ones
// are held throughout, and the address must still be refused exactly at
// the cap afterwards.
func TestEveryEndingNetHTTPBringsAboutGivesTheSlotBackOnce(t *testing.T) {
	const max, ip = 3, "127.0.0.40"
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) { panic("a handler's bug") })
	mux.HandleFunc("/panic-after-header", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		panic("a handler's bug after its header")
	})
	mux.HandleFunc("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = c.Close()
		}
	})
	h, _, addr := serveCapped(t, max, mux)
	var silent []net.Conn
	for range max - 1 {
		silent = append(silent, dialFrom(t, ip, addr))
	}
	waitConns(t, h, ip, max-1, max-1)

	for _, path := range []string{"/panic", "/panic-after-header", "/abort", "/hijack"} {
		for range 2 {
			c := dialFrom(t, ip, addr)
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			if !closedBy(c, 5*time.Second) {
				// A panic after the header leaves a truncated answer: read on.
				if _, err := io.Copy(io.Discard, c); err != nil {
					t.Fatalf("GET %s: the connection was not ended: %v", path, err)
				}
			}
			c.Close()
			waitConns(t, h, ip, max-1, max-1)
		}
	}

	// A keep-alive connection left idle: the idle timeout (300 ms) ends it.
	for range 2 {
		c := dialFrom(t, ip, addr)
		fmt.Fprintf(c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if !closedBy(c, 5*time.Second) {
			t.Fatal("a keep-alive connection outlived the idle timeout")
		}
		waitConns(t, h, ip, max-1, max-1)
	}

	silent = append(silent, dialFrom(t, ip, addr))
	waitConns(t, h, ip, max, max)
	if !closedBy(dialFrom(t, ip, addr), 2*time.Second) {
		t.Fatalf("a connection over the cap of %d was kept after the endings above: a slot was given back twice", max)
	}
	for i, c := range silent {
		if closedBy(c, 50*time.Millisecond) {
			t.Fatalf("silent connection %d within the cap was closed", i)
		}
	}
}

// A handler that writes nothing is answered by net/http after it returns
// (200, empty); on a connection that will be closed as it goes idle (its
// address at the cap, all silent) that answer says Connection: close too,
// so the client does not send its next request on it and lose it.
func TestAnAnswerNetHTTPWritesForAHandlerThatWroteNothingSaysConnectionClose(t *testing.T) {
	const max, ip = 2, "127.0.0.41"
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/empty", func(http.ResponseWriter, *http.Request) { <-release })
	h, _, addr := serveCapped(t, max, mux)

	c := heldAtTheCap(t, h, max, ip, addr, "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n")
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("answer %d, Connection: close %v; want 200 saying Connection: close (its address at the cap, nothing idle to close)", resp.StatusCode, resp.Close)
	}
	if !closedBy(c, 2*time.Second) {
		t.Fatal("the connection was kept after its answer")
	}
	waitConns(t, h, ip, max, max)
}

// An idle connection on which a next request began to arrive is passed
// over as room is made only while that request may still be on its way
// (arrivingGrace, 10 s): a peer that sends one to three bytes on its idle
// connections (net/http waits for four under the idle timeout, 120 s in
// chatd, before its header timeout starts) would otherwise hold them
// unclosable for the whole idle timeout, and with them at the cap every
// new connection of its address refused, where a silent new connection
// holds its slot only for the header timeout. Past the grace the
// connection is closed to make room like any idle one.
func TestAnIdleConnectionWhoseRequestStopsArrivingIsClosedToMakeRoomAfterTheGrace(t *testing.T) {
	const ip = "127.0.0.42"
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	h := NewHTTP(1, nil, nil, nil)
	var ahead atomic.Int64 // the cap's clock, moved on by the test
	h.now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	h, _, addr := serveCappedIdle(t, h, 30*time.Second, mux)

	get := func(c net.Conn) int {
		t.Helper()
		fmt.Fprintf(c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET /ok: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	trickler := dialFrom(t, ip, addr)
	get(trickler)
	waitConns(t, h, ip, 1, 1)
	// One byte of a "next request", and no more: net/http waits for four.
	if _, err := io.WriteString(trickler, "G"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Arriving(netip.MustParseAddr(ip)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the byte sent on the idle connection was not seen arriving within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !closedBy(dialFrom(t, ip, addr), 2*time.Second) {
		t.Fatal("a new connection was let in while the idle one's request may still be arriving: want it refused within the grace")
	}
	waitConns(t, h, ip, 1, 1)

	// The grace past, the request arriving no further.
	ahead.Store(int64(arrivingGrace + time.Second))
	newer := dialFrom(t, ip, addr)
	if !closedBy(trickler, 2*time.Second) {
		t.Fatal("an idle connection whose next request stopped arriving one byte in was not closed to make room after the grace: a peer trickling a byte on its idle connections keeps its address's new connections out for the whole idle timeout")
	}
	if code := get(newer); code != http.StatusOK {
		t.Fatalf("the connection room was made for was answered %d", code)
	}
}

// A connection whose request was arriving when it was passed over, once
// that request is answered and it goes idle again, is closable again:
// what arrived was that request, and nothing of a next one has.
func TestAnIdleConnectionServedAfterItsRequestArrivedIsClosableAgain(t *testing.T) {
	const ip = "127.0.0.43"
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	h, _, addr := serveCappedIdle(t, NewHTTP(1, nil, nil, nil), 30*time.Second, mux)
	c := dialFrom(t, ip, addr)
	br := bufio.NewReader(c)
	get := func() {
		t.Helper()
		fmt.Fprintf(c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET /ok: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()
	waitConns(t, h, ip, 1, 1)
	get() // arrives on the idle connection, is answered: idle again
	waitConns(t, h, ip, 1, 1)
	if n := h.Arriving(netip.MustParseAddr(ip)); n != 0 {
		t.Fatalf("%d idle connections seen arriving after their request was answered, want 0", n)
	}
	newer := dialFrom(t, ip, addr)
	if !closedBy(c, 2*time.Second) {
		t.Fatal("the idle connection was not closed to make room: what arrived before its last answer still passes it over")
	}
	if closedBy(newer, 100*time.Millisecond) {
		t.Fatal("the connection room was made for was closed")
	}
}

// How an answer's Connection: close is decided on a connection that
// would be closed as it goes idle (its address at the cap, nothing idle
// to close): whatever writes the header (WriteHeader alone, a 304, a
// Flush, through http.ResponseController too, a HEAD answer) says it; a
// hijacked connection is the handler's, neither told nor closed by the
// cap, and no longer tracked.
func TestConnectionCloseIsDecidedHoweverTheHeaderIsWritten(t *testing.T) {
	const max = 2
	for i, c := range []struct {
		name, method string
		handle       func(http.ResponseWriter)
		code         int
	}{
		{"WriteHeader alone", http.MethodGet, func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, http.StatusNoContent},
		{"304", http.MethodGet, func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotModified) }, http.StatusNotModified},
		{"Flush", http.MethodGet, func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, http.StatusOK},
		{"ResponseController Flush", http.MethodGet, func(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }, http.StatusOK},
		{"HEAD", http.MethodHead, func(w http.ResponseWriter) { _, _ = io.WriteString(w, "a body HEAD leaves out") }, http.StatusOK},
		{"103 then 200", http.MethodGet, func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "ok")
		}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			ip := fmt.Sprintf("127.0.1.%d", i+1)
			release := make(chan struct{})
			mux := http.NewServeMux()
			mux.HandleFunc("/x", func(w http.ResponseWriter, _ *http.Request) {
				<-release
				c.handle(w)
			})
			h, _, addr := serveCapped(t, max, mux)
			conn := heldAtTheCap(t, h, max, ip, addr, fmt.Sprintf("%s /x HTTP/1.1\r\nHost: x\r\n\r\n", c.method))
			close(release)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, &http.Request{Method: c.method})
			for err == nil && resp.StatusCode == http.StatusEarlyHints {
				resp, err = http.ReadResponse(br, &http.Request{Method: c.method})
			}
			if err != nil {
				t.Fatalf("the answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code || !resp.Close {
				t.Fatalf("answer %d, Connection: close %v; want %d saying Connection: close", resp.StatusCode, resp.Close, c.code)
			}
			if !closedBy(conn, 2*time.Second) {
				t.Fatal("the connection was kept after its answer")
			}
			waitConns(t, h, ip, max, max)
		})
	}

	t.Run("hijack", func(t *testing.T) {
		const ip = "127.0.1.100"
		release := make(chan struct{})
		hijacked := make(chan net.Conn, 1)
		mux := http.NewServeMux()
		mux.HandleFunc("/x", func(w http.ResponseWriter, _ *http.Request) {
			<-release
			nc, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_, _ = io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
			hijacked <- nc
		})
		h, _, addr := serveCapped(t, max, mux)
		conn := heldAtTheCap(t, h, max, ip, addr, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
		close(release)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the answer: %v", err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Connection") != "Upgrade" {
			t.Fatalf("answer %d, Connection %q; want the handler's own 101 Upgrade", resp.StatusCode, resp.Header.Get("Connection"))
		}
		nc := <-hijacked
		t.Cleanup(func() { nc.Close() })
		waitConns(t, h, ip, max, max)
		if _, err := io.WriteString(nc, "still the handler's"); err != nil {
			t.Fatalf("write on the hijacked connection: %v", err)
		}
		line := make([]byte, len("still the handler's"))
		if _, err := io.ReadFull(br, line); err != nil {
			t.Fatalf("the hijacked connection was closed: %v", err)
		}
	})
}
