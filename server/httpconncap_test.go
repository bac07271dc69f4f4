package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// startHTTPCapped starts a node whose HTTP listener caps at max the
// connections per address that are new or idle.
func startHTTPCapped(t *testing.T, max int) *server.Server {
	t.Helper()
	return startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": fmt.Sprint(max)})
}

// dialHTTPFrom opens a TCP connection to addr from the local address ip,
// closed when the test ends.
func dialHTTPFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin answers whether the server closed c within d: a read gives
// EOF or a reset, not a timeout.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// getHealthz sends GET /healthz on c, reads the answer and leaves c open
// (keep-alive), failing unless it is 200 and keeps the connection.
func getHealthz(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: chatd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	readAnswer(t, c, http.StatusOK)
	_ = c.SetDeadline(time.Time{})
}

// readAnswer reads one response from c, failing unless its status is want
// and it keeps the connection open (no Connection: close).
func readAnswer(t *testing.T, c net.Conn, want int) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want || resp.Close {
		t.Fatalf("answer %d (Connection: close %v), want %d keeping the connection", resp.StatusCode, resp.Close, want)
	}
}

// getFrom is the status of GET /healthz from the local address ip on a
// connection of its own.
func getFrom(t *testing.T, ip, addr string) int {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	resp, err := cl.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz from %s: %v", ip, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// stallRequest starts a POST on c whose 2-byte JSON body stops after its
// first byte: a request that runs until finishRequest sends the rest.
func stallRequest(t *testing.T, c net.Conn) (finishRequest func()) {
	t.Helper()
	fmt.Fprintf(c, "POST /v1/conversations HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{", testnode.Token(t, 1))
	return func() {
		if _, err := io.WriteString(c, "}"); err != nil {
			t.Fatal(err)
		}
	}
}

// closedFor is chat_http_connections_closed_total{reason}.
func closedFor(t *testing.T, srv *server.Server, reason string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "chat_http_connections_closed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// waitCounted waits until n connections of ip are counted (new or idle).
func waitCounted(t *testing.T, srv *server.Server, ip string, n int) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("%d HTTP connections of %s counted", n, ip), func() bool {
		counted, _ := srv.HTTPConns(ip)
		return counted == n
	})
}

// Connections to the HTTP listener that send no request were bounded only
// by ReadHeaderTimeout (10 s): one address re-opening them could hold
// thousands and run the node out of descriptors. Now an address holding
// max_pending_connects_per_ip of them has the next closed as it is
// accepted, while other addresses are served, and it is served again once
// one of its silent connections is gone.
func TestAnAddressHoldingTooManyHTTPConnectionsWithoutARequestHasTheNextClosedOthersAreServed(t *testing.T) {
	t.Parallel()
	srv := startHTTPCapped(t, 4)
	addr := srv.HTTPAddr()
	var silent []net.Conn
	for range 4 {
		silent = append(silent, dialHTTPFrom(t, "127.0.0.2", addr))
	}
	waitCounted(t, srv, "127.0.0.2", 4)

	over := dialHTTPFrom(t, "127.0.0.2", addr)
	if !closedWithin(over, 2*time.Second) {
		t.Fatal("the 5th silent HTTP connection of 127.0.0.2 was not closed within 2 s (ReadHeaderTimeout is 10 s)")
	}
	if n := closedFor(t, srv, "too_many_pending"); n != 1 {
		t.Fatalf("chat_http_connections_closed_total{reason=\"too_many_pending\"} = %v, want 1", n)
	}
	if closedWithin(silent[0], 200*time.Millisecond) {
		t.Fatal("a silent connection within the cap was closed")
	}
	if code := getFrom(t, "127.0.0.3", addr); code != http.StatusOK {
		t.Fatalf("GET /healthz from another address: %d", code)
	}

	silent[0].Close()
	waitCounted(t, srv, "127.0.0.2", 3)
	if code := getFrom(t, "127.0.0.2", addr); code != http.StatusOK {
		t.Fatalf("GET /healthz from 127.0.0.2 once one of its silent connections closed: %d", code)
	}
}

// A keep-alive connection idle between requests counts as a new one does
// (one trivial request per connection would otherwise get around the
// cap), but it may be closed at any time: an address at the cap makes
// room for a newer connection by closing its longest idle one, and only
// when none of its connections is idle is the newcomer closed. A
// connection going idle over the cap, nothing idle to close, is closed
// itself after its answer.
func TestIdleKeepAliveHTTPConnectionsCountAndTheLongestIdleMakesRoom(t *testing.T) {
	t.Parallel()
	srv := startHTTPCapped(t, 4)
	addr := srv.HTTPAddr()
	const ip = "127.0.0.4"
	// One after the other, so that idle[0] is the longest idle (its answer
	// read, a connection counts when it has gone idle).
	var idle []net.Conn
	for i := range 2 {
		idle = append(idle, dialHTTPFrom(t, ip, addr))
		getHealthz(t, idle[i])
		waitCounted(t, srv, ip, i+1)
	}
	silent := []net.Conn{dialHTTPFrom(t, ip, addr), dialHTTPFrom(t, ip, addr)}
	waitCounted(t, srv, ip, 4)

	for i := range idle {
		n := dialHTTPFrom(t, ip, addr)
		if !closedWithin(idle[i], 2*time.Second) {
			t.Fatalf("idle connection %d was not closed to make room for a new one", i)
		}
		if closedWithin(n, 200*time.Millisecond) {
			t.Fatalf("new connection %d was closed, though its address had an idle one", i)
		}
		silent = append(silent, n)
	}
	if n := closedFor(t, srv, "idle_over_cap"); n != 2 {
		t.Fatalf("chat_http_connections_closed_total{reason=\"idle_over_cap\"} = %v, want 2", n)
	}
	waitCounted(t, srv, ip, 4)
	if over := dialHTTPFrom(t, ip, addr); !closedWithin(over, 2*time.Second) {
		t.Fatal("a 5th connection was not closed while 4 silent ones held the cap")
	}

	// A request makes its connection stop counting; a newer silent one
	// takes the slot; the answered connection, which would go idle over
	// the cap with nothing idle to close, is closed after its answer, and
	// the answer says so (Connection: close), so that the client does not
	// send its next request on it.
	finish := stallRequest(t, silent[0])
	waitCounted(t, srv, ip, 3)
	dialHTTPFrom(t, ip, addr)
	waitCounted(t, srv, ip, 4)
	finish()
	_ = silent[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(silent[0]), nil)
	if err != nil {
		t.Fatalf("the stalled request's answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !resp.Close {
		t.Fatal("the answer on a connection closed after it (its address at the cap, its other connections all silent) does not say Connection: close: the client sends its next request on it, and loses it")
	}
	if !closedWithin(silent[0], 2*time.Second) {
		t.Fatal("a connection going idle over the cap, its address's other connections all silent, was kept")
	}
	if n := closedFor(t, srv, "idle_over_cap"); n != 3 {
		t.Fatalf("chat_http_connections_closed_total{reason=\"idle_over_cap\"} = %v, want 3", n)
	}
	waitCounted(t, srv, ip, 4)
}

// A connection serving a request (a long download, a slow upload) is not
// counted: an address with the cap's number of requests running is still
// served on another connection.
func TestHTTPConnectionsRunningARequestDoNotCountAgainstTheCap(t *testing.T) {
	t.Parallel()
	srv := startHTTPCapped(t, 4)
	addr := srv.HTTPAddr()
	const ip = "127.0.0.5"
	for range 4 {
		stallRequest(t, dialHTTPFrom(t, ip, addr))
	}
	testkit.WaitFor(t, 5*time.Second, "4 requests read and running, none counted", func() bool {
		counted, tracked := srv.HTTPConns(ip)
		return counted == 0 && tracked == 4
	})
	for range 2 {
		dialHTTPFrom(t, ip, addr)
	}
	waitCounted(t, srv, ip, 2)
	if code := getFrom(t, ip, addr); code != http.StatusOK {
		t.Fatalf("GET /healthz from an address with 4 requests running and 2 silent connections: %d", code)
	}
}

// The cap counts an address's connections to http_addr and https_addr
// together, an HTTPS one from its accept, before its TLS handshake; a
// connection within it is handed to net/http as the TLS connection it is,
// and an idle one makes room as a plain one does.
func TestTheHTTPCapCountsHTTPSConnectionsBeforeTheirHandshake(t *testing.T) {
	t.Parallel()
	certPath, keyPath, roots := serverCert(t)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_HTTPS_ADDR": "127.0.0.1:0", "CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "2"})
	const ip = "127.0.0.6"
	dialHTTPFrom(t, ip, srv.HTTPAddr())
	dialHTTPFrom(t, ip, srv.HTTPSAddr())
	waitCounted(t, srv, ip, 2)
	if over := dialHTTPFrom(t, ip, srv.HTTPSAddr()); !closedWithin(over, 2*time.Second) {
		t.Fatal("a 3rd connection without a request (2 held on http_addr and https_addr) was not closed")
	}

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(hc.CloseIdleConnections)
	resp, err := hc.Get("https://" + srv.HTTPSAddr() + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over HTTPS from another address: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to its end, or the client closes the connection
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("GET /healthz over HTTPS: %d (TLS %v)", resp.StatusCode, resp.TLS != nil)
	}
	waitCounted(t, srv, "127.0.0.7", 1) // its keep-alive connection, idle

	// A TLS connection idle is closed to make room as a plain one is.
	dialHTTPFrom(t, "127.0.0.7", srv.HTTPSAddr())
	waitCounted(t, srv, "127.0.0.7", 2)
	newer := dialHTTPFrom(t, "127.0.0.7", srv.HTTPSAddr())
	testkit.WaitFor(t, 5*time.Second, "the idle TLS connection closed to make room", func() bool {
		return closedFor(t, srv, "idle_over_cap") == 1
	})
	if closedWithin(newer, 200*time.Millisecond) {
		t.Fatal("the connection the idle one made room for was closed")
	}
}

// A trusted proxy's connections are not counted: an HTTP proxy keeps a
// pool of idle connections and a TCP balancer brings every client's from
// its own address, so counting them would cap the whole node's traffic at
// one address's share.
func TestATrustedProxysHTTPConnectionsAreNotCapped(t *testing.T) {
	t.Parallel()
	const proxy = "127.0.0.8"
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "2",
		"CHAT_FORWARDED_TRUSTED": proxy + "/32"})
	var silent []net.Conn
	for range 3 {
		silent = append(silent, dialHTTPFrom(t, proxy, srv.HTTPAddr()))
	}
	if code := getFrom(t, proxy, srv.HTTPAddr()); code != http.StatusOK {
		t.Fatalf("GET /healthz from the proxy holding 3 silent connections: %d", code)
	}
	for i, c := range silent {
		if closedWithin(c, 100*time.Millisecond) {
			t.Fatalf("the proxy's silent connection %d was closed", i)
		}
	}
	if counted, tracked := srv.HTTPConns(proxy); counted != 0 || tracked != 0 {
		t.Fatalf("the proxy's connections: %d counted, %d tracked, want none", counted, tracked)
	}
}

// Every way an HTTP connection ends gives its slot back exactly once:
// hundreds of connections from a few addresses, opened and ended at once
// over http_addr and https_addr (closed silent, after one request or two
// on a keep-alive connection, a failed TLS handshake, a TLS connection
// served, a WebSocket upgrade, and those the cap itself closed), leave
// every address with nothing counted and nothing tracked, and each is
// served afterwards.
func TestHTTPConnectionsEndingConcurrentlyInEveryWayLeaveNothingCounted(t *testing.T) {
	t.Parallel()
	certPath, keyPath, roots := serverCert(t)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_HTTPS_ADDR": "127.0.0.1:0", "CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "8", "CHAT_MAX_PENDING_CONNECTS_PER_IP": "8"})
	ips := []string{"127.0.0.20", "127.0.0.21", "127.0.0.22", "127.0.0.23"}
	const perIP = 72

	// Each way ends its connection and returns; what the server answers
	// (or whether the cap closed it first) does not matter here.
	request := func(c net.Conn, n int) {
		br := bufio.NewReader(c)
		for range n {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: chatd\r\n\r\n"); err != nil {
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	ways := []func(ip string){
		func(ip string) { // silent, closed by the client
			dialOnce(ip, srv.HTTPAddr(), func(net.Conn) {})
		},
		func(ip string) { // one request, then closed while idle
			dialOnce(ip, srv.HTTPAddr(), func(c net.Conn) { request(c, 1) })
		},
		func(ip string) { // two requests on one keep-alive connection
			dialOnce(ip, srv.HTTPAddr(), func(c net.Conn) { request(c, 2) })
		},
		func(ip string) { // plain text to the TLS listener: the handshake fails
			dialOnce(ip, srv.HTTPSAddr(), func(c net.Conn) {
				_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: chatd\r\n\r\n")
				_, _ = io.Copy(io.Discard, c)
			})
		},
		func(ip string) { // a TLS handshake the client gives up on (unknown CA)
			dialOnce(ip, srv.HTTPSAddr(), func(c net.Conn) {
				_ = tls.Client(c, &tls.Config{ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}).Handshake()
			})
		},
		func(ip string) { // served over TLS, then closed while idle
			dialOnce(ip, srv.HTTPSAddr(), func(c net.Conn) {
				tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
				if tc.Handshake() == nil {
					request(tc, 1)
				}
			})
		},
		func(ip string) { // a WebSocket upgrade (hijacked), then closed
			dialOnce(ip, srv.HTTPAddr(), func(c net.Conn) {
				_, _ = io.WriteString(c, "GET /mqtt HTTP/1.1\r\nHost: chatd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
					"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n")
				_, _ = bufio.NewReader(c).ReadString('\n')
			})
		},
	}
	var wg sync.WaitGroup
	for _, ip := range ips {
		for i := range perIP {
			wg.Go(func() { ways[i%len(ways)](ip) })
		}
	}
	wg.Wait()

	for _, ip := range ips {
		testkit.WaitFor(t, 15*time.Second, "nothing of "+ip+" counted or tracked", func() bool {
			counted, tracked := srv.HTTPConns(ip)
			return counted == 0 && tracked == 0
		})
		if code := getFrom(t, ip, srv.HTTPAddr()); code != http.StatusOK {
			t.Fatalf("GET /healthz from %s after the churn: %d", ip, code)
		}
	}
}

// dialOnce opens a connection from ip to addr, hands it to use with a
// 10 s deadline and closes it; a refused dial is no failure (the cap may
// close connections faster than the kernel's backlog takes them).
func dialOnce(ip, addr string, use func(net.Conn)) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	use(c)
}

// The HTTP cap has a setting of its own: an operator behind a proxy that
// cannot be named as trusted turns it off and keeps the MQTT cap on
// connections that have not sent their CONNECT, and the other way round.
// One setting for both made turning the HTTP cap off turn the MQTT one off
// too, and a cap set for MQTT's reconnect storms capped HTTP's keep-alive
// pools alike.
func TestTheHTTPCapAndTheMQTTPendingCapAreSetApart(t *testing.T) {
	t.Parallel()
	const ip = "127.0.0.30"
	t.Run("HTTPOffMQTTOn", func(t *testing.T) {
		t.Parallel()
		srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_PENDING_CONNECTS_PER_IP": "2",
			"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "0"})
		var silent []net.Conn
		for range 3 {
			silent = append(silent, dialHTTPFrom(t, ip, srv.HTTPAddr()))
		}
		if code := getFrom(t, ip, srv.HTTPAddr()); code != http.StatusOK {
			t.Fatalf("GET /healthz from an address holding 3 silent HTTP connections, the HTTP cap off: %d", code)
		}
		for i, c := range silent {
			if closedWithin(c, 100*time.Millisecond) {
				t.Fatalf("silent HTTP connection %d was closed, the HTTP cap off", i)
			}
		}
		if n := closedFor(t, srv, "too_many_pending") + closedFor(t, srv, "idle_over_cap"); n != 0 {
			t.Fatalf("%v HTTP connections closed for a cap turned off", n)
		}
		for range 2 {
			dialHTTPFrom(t, ip, srv.MQTTAddr())
		}
		testkit.WaitFor(t, 5*time.Second, "2 silent MQTT connections awaiting their CONNECT", func() bool {
			return srv.Broker.AwaitingConnect() == 2
		})
		if !closedWithin(dialHTTPFrom(t, ip, srv.MQTTAddr()), 3*time.Second) {
			t.Fatal("a 3rd silent MQTT connection was kept with the HTTP cap off and the MQTT one at 2")
		}
	})
	t.Run("HTTPOnMQTTOff", func(t *testing.T) {
		t.Parallel()
		srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_PENDING_CONNECTS_PER_IP": "0",
			"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "2"})
		for range 2 {
			dialHTTPFrom(t, ip, srv.HTTPAddr())
		}
		waitCounted(t, srv, ip, 2)
		if !closedWithin(dialHTTPFrom(t, ip, srv.HTTPAddr()), 2*time.Second) {
			t.Fatal("a 3rd silent HTTP connection was kept with the HTTP cap at 2 and the MQTT one off")
		}
		for range 3 {
			dialHTTPFrom(t, ip, srv.MQTTAddr())
		}
		testkit.WaitFor(t, 5*time.Second, "3 silent MQTT connections awaiting their CONNECT", func() bool {
			return srv.Broker.AwaitingConnect() == 3
		})
	})
}

// The cap counts whole connections, which holds because https_addr
// speaks HTTP/1.1 only: a client offering h2 gets HTTP/1.1, one request
// at a time per connection, and its keep-alive connection counts once it
// is idle. Over h2 one connection would carry many streams, and closing
// it as idle without a GOAWAY could cut off a stream being opened.
func TestHTTPSNegotiatesHTTP1SoTheCapCountsWholeConnections(t *testing.T) {
	t.Parallel()
	certPath, keyPath, roots := serverCert(t)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_HTTPS_ADDR": "127.0.0.1:0", "CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "4"})
	const ip = "127.0.0.31"
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}}}
	t.Cleanup(hc.CloseIdleConnections)
	resp, err := hc.Get("https://" + srv.HTTPSAddr() + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over HTTPS offering h2: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.TLS == nil || resp.TLS.NegotiatedProtocol == "h2" {
		t.Fatalf("GET /healthz over HTTPS offering h2 was answered over %s (ALPN %q)", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	waitCounted(t, srv, ip, 1)
}

// A connection the server itself ends gives its slot back as one its
// client closes does: silent ones at the header timeout (10 s), and at
// shutdown the idle and silent ones left.
func TestHTTPConnectionsTheServerEndsAtItsTimeoutOrShutdownLeaveNothingCounted(t *testing.T) {
	t.Parallel()
	srv := startHTTPCapped(t, 4)
	addr := srv.HTTPAddr()
	const ip = "127.0.0.32"
	idle := dialHTTPFrom(t, ip, addr)
	getHealthz(t, idle)
	silent := []net.Conn{dialHTTPFrom(t, ip, addr), dialHTTPFrom(t, ip, addr)}
	waitCounted(t, srv, ip, 3)
	for i, c := range silent {
		if !closedWithin(c, 15*time.Second) {
			t.Fatalf("silent connection %d outlived the header timeout", i)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the idle connection alone counted and tracked", func() bool {
		counted, tracked := srv.HTTPConns(ip)
		return counted == 1 && tracked == 1
	})

	dialHTTPFrom(t, ip, addr)
	waitCounted(t, srv, ip, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Shutdown closes them and returns; their goroutines end just after.
	testkit.WaitFor(t, 5*time.Second, "nothing counted or tracked after shutdown", func() bool {
		counted, tracked := srv.HTTPConns(ip)
		return counted == 0 && tracked == 0
	})
}

// An idle connection on which the client's next request has begun to
// arrive is not closed to make room: net/http reports it active only once
// the request's header is read whole, and closing it would lose the
// request (Go's Transport resends only idempotent ones). The longest idle
// connection on which nothing has arrived is closed instead, plain or TLS.
func TestAnIdleHTTPConnectionWhoseNextRequestIsArrivingIsNotClosedToMakeRoom(t *testing.T) {
	t.Parallel()
	certPath, keyPath, roots := serverCert(t)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_HTTPS_ADDR": "127.0.0.1:0", "CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "2"})
	for _, c := range []struct {
		name, ip string
		dial     func(ip string) net.Conn
	}{
		{"HTTP", "127.0.0.34", func(ip string) net.Conn { return dialHTTPFrom(t, ip, srv.HTTPAddr()) }},
		{"HTTPS", "127.0.0.35", func(ip string) net.Conn {
			tc := tls.Client(dialHTTPFrom(t, ip, srv.HTTPSAddr()), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := tc.Handshake(); err != nil {
				t.Fatalf("TLS handshake: %v", err)
			}
			return tc
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// reused is the longest idle, other idle since after it.
			reused := c.dial(c.ip)
			getHealthz(t, reused)
			waitCounted(t, srv, c.ip, 1)
			other := c.dial(c.ip)
			getHealthz(t, other)
			waitCounted(t, srv, c.ip, 2)

			// The next request on reused, its header not finished yet.
			if _, err := io.WriteString(reused, "GET /healthz HTTP/1.1\r\nHost: chatd\r\n"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 5*time.Second, "the request's first bytes read on the idle connection", func() bool {
				return srv.HTTPConnsArriving(c.ip) == 1
			})
			newer := c.dial(c.ip)
			if !closedWithin(other, 2*time.Second) {
				t.Fatal("the idle connection on which nothing arrived was not closed to make room")
			}
			if closedWithin(reused, 200*time.Millisecond) {
				t.Fatal("the idle connection whose next request was arriving was closed to make room: its request is lost")
			}
			_ = reused.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(reused, "\r\n"); err != nil {
				t.Fatal(err)
			}
			readAnswer(t, reused, http.StatusOK)
			if closedWithin(newer, 100*time.Millisecond) {
				t.Fatal("the connection room was made for was closed")
			}
		})
	}
	if n := closedFor(t, srv, "idle_over_cap"); n != 2 {
		t.Fatalf("chat_http_connections_closed_total{reason=\"idle_over_cap\"} = %v, want 2", n)
	}
}
