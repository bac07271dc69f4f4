package broker

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"

	"github.com/chatd/chatd/internal/conncap"
	"github.com/chatd/chatd/internal/testcert"
)

// connect311 is an MQTT 3.1.1 CONNECT: client id "dev", user "dev",
// password "pw", clean session, keepalive 30 s.
var connect311 = []byte{0x10, 24, 0, 4, 'M', 'Q', 'T', 'T', 4, 0xC2, 0, 30,
	0, 3, 'd', 'e', 'v', 0, 3, 'd', 'e', 'v', 0, 2, 'p', 'w'}

// pendingFrom is how many connections from ip wait for their CONNECT.
func (p *pendingConnects) pendingFrom(ip string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.perIP.Of(conncap.Key(netip.MustParseAddr(ip)))
}

// dialFrom connects to addr from the local address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	return c
}

// connectAndAuthenticate sends a CONNECT with the ledger's credentials on
// c and answers whether a CONNACK 0 (accepted) came back within a second.
func connectAndAuthenticate(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(connect311); err != nil {
		return err
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil {
		return err
	}
	if !bytes.Equal(ack, []byte{0x20, 2, 0, 0}) {
		return errors.New("CONNACK " + string(rune('0'+ack[3])))
	}
	return nil
}

// waitClosed answers whether the peer closed c within d (a read gives EOF
// or a reset, not a timeout).
func waitClosed(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func startCappedBroker(t *testing.T, max int, refused func(), wrap ...func(net.Listener) net.Listener) (*TCPListener, *mqtt.Server) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	srv := mqtt.New(&mqtt.Options{Logger: log})
	ledger := &auth.Ledger{Auth: auth.AuthRules{{Username: "dev", Password: "pw", Allow: true}}}
	if err := srv.AddHook(new(auth.Hook), &auth.Options{Ledger: ledger}); err != nil {
		t.Fatal(err)
	}
	l := NewTCPListener("t", "0.0.0.0:0", nil, log)
	l.clients, l.pending = &srv.Listeners.ClientsWg, newPendingConnects(max, refused)
	if len(wrap) > 0 {
		l.wrap = wrap[0]
	}
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.pending.cutAll()
		_ = srv.Close()
	})
	return l, srv
}

// One address opening connections that send nothing held a descriptor,
// goroutines and a buffer for each until its connect timeout, and no
// connect limit saw them (they apply to a CONNECT): re-opening them, one
// host could exhaust the node's descriptors. Now the 65th connection of an
// address waiting for its CONNECT is closed at once, others still get in,
// and the address gets in again once its silent connections are gone.
func TestAnAddressHoldingTooManyConnectionsWithoutCONNECTIsRefusedOthersAreNot(t *testing.T) {
	var refused atomic.Int64
	l, _ := startCappedBroker(t, 64, func() { refused.Add(1) })
	_, port, _ := net.SplitHostPort(l.Address())
	addr := net.JoinHostPort("127.0.0.1", port)

	silent := make([]net.Conn, 0, 64)
	for range 64 {
		silent = append(silent, dialFrom(t, "127.0.0.2", addr))
	}
	defer func() {
		for _, c := range silent {
			_ = c.Close()
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); l.pending.pendingFrom("127.0.0.2") < 64; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 64 silent connections waiting for their CONNECT after 5 s", l.pending.pendingFrom("127.0.0.2"))
		}
		time.Sleep(5 * time.Millisecond)
	}

	over := dialFrom(t, "127.0.0.2", addr)
	defer over.Close()
	if !waitClosed(over, 2*time.Second) {
		t.Fatal("the 65th silent connection of 127.0.0.2 was not closed within 2 s (the connect timeout is 10 s)")
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("%d refusals counted, want 1", n)
	}
	for i, c := range silent[:3] {
		if waitClosed(c, 50*time.Millisecond) {
			t.Fatalf("silent connection %d was closed: the first 64 must hold", i)
		}
	}

	device := dialFrom(t, "127.0.0.3", addr)
	defer device.Close()
	if err := connectAndAuthenticate(device); err != nil {
		t.Fatalf("a device from 127.0.0.3 did not connect while 127.0.0.2 was at its cap: %v", err)
	}

	for _, c := range silent {
		_ = c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); l.pending.pendingFrom("127.0.0.2") > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of 127.0.0.2 still counted 5 s after they closed", l.pending.pendingFrom("127.0.0.2"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	again := dialFrom(t, "127.0.0.2", addr)
	defer again.Close()
	if err := connectAndAuthenticate(again); err != nil {
		t.Fatalf("127.0.0.2 could not connect once its silent connections closed: %v", err)
	}
}

// A device that sent its CONNECT no longer counts: an address whose
// connections are all authenticated is not capped by this.
func TestConnectionsThatSentTheirCONNECTDoNotCountAgainstTheCap(t *testing.T) {
	l, _ := startCappedBroker(t, 2, nil)
	_, port, _ := net.SplitHostPort(l.Address())
	addr := net.JoinHostPort("127.0.0.1", port)
	// mochi's auth hook does not call SetKeepalive (hooks.Chat does):
	// forget here as it would.
	for range 4 {
		c := dialFrom(t, "127.0.0.4", addr)
		defer c.Close()
		for deadline := time.Now().Add(5 * time.Second); l.pending.pendingFrom("127.0.0.4") == 0; {
			if time.Now().After(deadline) {
				t.Fatal("connection not counted")
			}
			time.Sleep(5 * time.Millisecond)
		}
		l.pending.mu.Lock()
		for pc := range l.pending.conns {
			l.pending.mu.Unlock()
			pc.SetKeepalive(30 * time.Second)
			l.pending.mu.Lock()
			break
		}
		l.pending.mu.Unlock()
		if err := connectAndAuthenticate(c); err != nil {
			t.Fatalf("connect: %v", err)
		}
	}
}

// Over WebSocket the address is known before the upgrade: over the cap
// the upgrade is refused with 429, nothing upgraded.
func TestAWebSocketUpgradeOverThePendingCapIsRefusedBeforeUpgrading(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	srv := mqtt.New(&mqtt.Options{Logger: log})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	l := NewWSListener("w", nil, log)
	l.clients, l.pending = &srv.Listeners.ClientsWg, newPendingConnects(2, func() { refused.Add(1) })
	l.trusted = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(l)
	defer hs.Close()
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	defer func() { l.pending.cutAll(); _ = srv.Close() }()
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/mqtt"
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
	from := func(ip string) http.Header { return http.Header{"X-Forwarded-For": {ip}} }
	for range 2 {
		ws, _, err := d.Dial(url, from("198.51.100.7"))
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
	}
	_, resp, err := d.Dial(url, from("198.51.100.7"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("third silent upgrade from one address: err %v, HTTP %d; want 429", err, status)
	}
	if refused.Load() != 1 {
		t.Fatalf("%d refusals counted, want 1", refused.Load())
	}
	ws, _, err := d.Dial(url, from("198.51.100.8"))
	if err != nil {
		t.Fatalf("another address was refused: %v", err)
	}
	_ = ws.Close()
}

// failingListener fails its first n Accepts with EMFILE, noting when.
type failingListener struct {
	net.Listener
	n     int
	mu    sync.Mutex
	calls []time.Time
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	fail := len(l.calls) <= l.n
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Out of file descriptors, Accept fails until some close: the accept loop
// waits longer after each failure (5 ms, 10 ms, ... as net/http does)
// rather than spinning or giving up, and accepts again once Accept works.
func TestTheAcceptLoopBacksOffOnEMFILEAndKeepsAccepting(t *testing.T) {
	fl := &failingListener{n: 5}
	l, _ := startCappedBroker(t, 64, nil, func(ln net.Listener) net.Listener { fl.Listener = ln; return fl })
	_, port, _ := net.SplitHostPort(l.Address())
	c := dialFrom(t, "127.0.0.5", net.JoinHostPort("127.0.0.1", port))
	defer c.Close()
	if err := connectAndAuthenticate(c); err != nil {
		t.Fatalf("no connection accepted after Accept's EMFILE errors: %v", err)
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.calls) < 6 {
		t.Fatalf("%d Accept calls, want the 5 failures and a success", len(fl.calls))
	}
	// A sleep lasts at least what it was asked: 5 ms after the first
	// failure, doubled after each.
	for k, want := 1, 5*time.Millisecond; k <= 5; k, want = k+1, 2*want {
		if gap := fl.calls[k].Sub(fl.calls[k-1]); gap < want {
			t.Fatalf("Accept retried %v after failure %d: want %v or more (a wait growing from 5 ms)", gap, k, want)
		}
	}
}

// With the PROXY protocol on, a connection was counted only once its
// header was read (or found missing), so a peer that sent nothing, from
// a trusted network or any other, held connections uncounted until the
// connect timeout, as many as it liked. Now one counts from its accept,
// under the peer's address while its header is awaited, and under the
// client's the header names once it arrived.
func TestConnectionsAwaitingTheirPROXYHeaderCountUnderThePeerThenTheClient(t *testing.T) {
	var refused atomic.Int64
	const trustedPeer, untrustedPeer, client = "127.0.0.6", "127.0.0.7", "198.51.100.7"
	l, _ := startCappedBroker(t, 3, func() { refused.Add(1) },
		ProxyProtocol([]netip.Prefix{netip.MustParsePrefix(trustedPeer + "/32")}))
	_, port, _ := net.SplitHostPort(l.Address())
	addr := net.JoinHostPort("127.0.0.1", port)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	dial := func(ip string) net.Conn {
		c := dialFrom(t, ip, addr)
		open = append(open, c)
		return c
	}

	// The balancer's headers name the client: counted as the client's.
	for range 2 {
		c := dial(trustedPeer)
		if _, err := io.WriteString(c, "PROXY TCP4 "+client+" 127.0.0.1 40000 1883\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitPendingOf(t, l.pending, client, 2, "behind the balancer")
	waitPendingOf(t, l.pending, trustedPeer, 0, "the balancer")

	for _, peer := range []string{trustedPeer, untrustedPeer} {
		silent := make([]net.Conn, 3)
		for i := range silent {
			silent[i] = dial(peer)
		}
		waitPendingOf(t, l.pending, peer, 3, "silent")
		over := dial(peer)
		if !waitClosed(over, 2*time.Second) {
			t.Fatalf("the 4th connection of %s sending nothing, not even a PROXY header, was not closed within 2 s (the connect timeout is 10 s)", peer)
		}
		for i, c := range silent {
			if waitClosed(c, 50*time.Millisecond) {
				t.Fatalf("%s: silent connection %d was closed: the first 3 must hold", peer, i)
			}
		}
		for _, c := range silent {
			_ = c.Close()
		}
		waitPendingOf(t, l.pending, peer, 0, "closed")
	}
	if n := refused.Load(); n != 2 {
		t.Fatalf("%d refusals counted, want 2", n)
	}

	// A header naming a client at the cap: refused as that client's.
	c := dial(trustedPeer)
	if _, err := io.WriteString(c, "PROXY TCP4 "+client+" 127.0.0.1 40001 1883\r\n"); err != nil {
		t.Fatal(err)
	}
	waitPendingOf(t, l.pending, client, 3, "behind the balancer")
	over := dial(trustedPeer)
	if _, err := io.WriteString(over, "PROXY TCP4 "+client+" 127.0.0.1 40002 1883\r\n"); err != nil {
		t.Fatal(err)
	}
	if !waitClosed(over, 2*time.Second) {
		t.Fatalf("a 4th connection the balancer's header says is %s's was not closed within 2 s", client)
	}
	waitPendingOf(t, l.pending, trustedPeer, 0, "the balancer")

	device := dial(trustedPeer)
	if _, err := io.WriteString(device, "PROXY TCP4 198.51.100.8 127.0.0.1 40003 1883\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := connectAndAuthenticate(device); err != nil {
		t.Fatalf("a device behind the balancer did not connect while another client was at its cap: %v", err)
	}
}

// A PROXY protocol listener reads the header first, and a connection that
// sends nothing waits for it until its connect timeout: a peer outside
// the trusted networks is counted from its accept, so its silent
// connections are capped as on any listener. One that sends a header it
// may not send is closed and no longer counted.
func TestSilentConnectionsOfAnUntrustedPeerOnAProxyProtocolListenerAreCapped(t *testing.T) {
	var refused atomic.Int64
	lb := []netip.Prefix{netip.MustParsePrefix("10.255.0.0/16")} // not this test's peers
	l, _ := startCappedBroker(t, 2, func() { refused.Add(1) }, ProxyProtocol(lb))
	_, port, _ := net.SplitHostPort(l.Address())
	addr := net.JoinHostPort("127.0.0.1", port)

	for range 2 {
		c := dialFrom(t, "127.0.0.6", addr)
		defer c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); l.pending.pendingFrom("127.0.0.6") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 silent connections of 127.0.0.6 counted as waiting for their CONNECT after 5 s", l.pending.pendingFrom("127.0.0.6"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	over := dialFrom(t, "127.0.0.6", addr)
	defer over.Close()
	if !waitClosed(over, 2*time.Second) {
		t.Fatal("the 3rd silent connection of 127.0.0.6 was not closed within 2 s (the connect timeout is 10 s)")
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("%d refusals counted, want 1", n)
	}

	forged := dialFrom(t, "127.0.0.7", addr)
	defer forged.Close()
	if _, err := forged.Write([]byte("PROXY TCP4 192.0.2.1 127.0.0.1 1234 1883\r\n")); err != nil {
		t.Fatal(err)
	}
	if !waitClosed(forged, 5*time.Second) {
		t.Fatal("an untrusted peer's PROXY header was not refused")
	}
	for deadline := time.Now().Add(5 * time.Second); l.pending.pendingFrom("127.0.0.7") > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the refused PROXY connection of 127.0.0.7 still counted 5 s after it closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	device := dialFrom(t, "127.0.0.7", addr)
	defer device.Close()
	if err := connectAndAuthenticate(device); err != nil {
		t.Fatalf("a device from 127.0.0.7 did not connect: %v", err)
	}
}

// loopback is l's address on 127.0.0.1.
func loopback(l *TCPListener) string {
	_, port, _ := net.SplitHostPort(l.Address())
	return net.JoinHostPort("127.0.0.1", port)
}

// waitPendingOf waits up to 5 s until ip has want connections counted by
// p as waiting for their CONNECT; what names the moment in a failure.
func waitPendingOf(t *testing.T, p *pendingConnects, ip string, want int, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.pendingFrom(ip) != want; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d connections of %s counted as waiting for their CONNECT after 5 s, want %d", what, p.pendingFrom(ip), ip, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// However a connection that has not sent its CONNECT ends (its peer goes,
// its CONNECT is refused, its TLS handshake fails, the broker shuts down,
// its WebSocket upgrade is refused), its address's count goes back to
// where it was, once: with a cap of 1, the address connects again.
func TestAConnectionEndingBeforeItsCONNECTIsCountedNoMore(t *testing.T) {
	const ip = "127.0.0.8"
	t.Run("its peer closes it", func(t *testing.T) {
		l, _ := startCappedBroker(t, 1, nil)
		addr := loopback(l)
		c := dialFrom(t, ip, addr)
		waitPendingOf(t, l.pending, ip, 1, "silent")
		_ = c.Close()
		waitPendingOf(t, l.pending, ip, 0, "closed")
		again := dialFrom(t, ip, addr)
		defer again.Close()
		if err := connectAndAuthenticate(again); err != nil {
			t.Fatalf("%s could not connect again: %v", ip, err)
		}
	})
	t.Run("its CONNECT is refused", func(t *testing.T) {
		l, _ := startCappedBroker(t, 1, nil)
		addr := loopback(l)
		c := dialFrom(t, ip, addr)
		defer c.Close()
		bad := bytes.Replace(bytes.Clone(connect311), []byte("pw"), []byte("no"), 1)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(bad); err != nil {
			t.Fatal(err)
		}
		ack := make([]byte, 4)
		if _, err := io.ReadFull(c, ack); err != nil || ack[3] == 0 {
			t.Fatalf("CONNACK % x, %v: want a refusal", ack, err)
		}
		waitPendingOf(t, l.pending, ip, 0, "refused")
		again := dialFrom(t, ip, addr)
		defer again.Close()
		if err := connectAndAuthenticate(again); err != nil {
			t.Fatalf("%s could not connect again: %v", ip, err)
		}
	})
	t.Run("its TLS handshake fails", func(t *testing.T) {
		certPEM, keyPEM := testcert.SelfSigned(t, "chatd")
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.DiscardHandler)
		srv := mqtt.New(&mqtt.Options{Logger: log})
		if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
			t.Fatal(err)
		}
		l := NewTCPListener("s", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}}, log)
		l.clients, l.pending = &srv.Listeners.ClientsWg, newPendingConnects(1, nil)
		if err := srv.AddListener(l); err != nil {
			t.Fatal(err)
		}
		if err := srv.Serve(); err != nil {
			t.Fatal(err)
		}
		defer func() { l.pending.cutAll(); _ = srv.Close() }()
		c := dialFrom(t, ip, l.Address())
		defer c.Close()
		waitPendingOf(t, l.pending, ip, 1, "before its handshake")
		if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if !waitClosed(c, 5*time.Second) {
			t.Fatal("a connection that is no TLS was not closed")
		}
		waitPendingOf(t, l.pending, ip, 0, "after its failed handshake")
		tc := tls.Client(dialFrom(t, ip, l.Address()), &tls.Config{InsecureSkipVerify: true})
		defer tc.Close()
		if err := connectAndAuthenticate(tc); err != nil {
			t.Fatalf("%s could not connect again: %v", ip, err)
		}
	})
	t.Run("the broker shuts down", func(t *testing.T) {
		l, _ := startCappedBroker(t, 1, nil)
		c := dialFrom(t, ip, loopback(l))
		defer c.Close()
		waitPendingOf(t, l.pending, ip, 1, "silent")
		l.pending.cutAll()
		if !waitClosed(c, 5*time.Second) {
			t.Fatal("a silent connection was not closed by the shutdown")
		}
		waitPendingOf(t, l.pending, ip, 0, "after the shutdown")
	})
	t.Run("its WebSocket upgrade is refused", func(t *testing.T) {
		l, url := startCappedWS(t, 1)
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
		h := http.Header{"X-Forwarded-For": {ip}, "Origin": {"https://elsewhere.example"}}
		if _, resp, err := d.Dial(url, h); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a foreign origin's upgrade: %v, %v; want 403", err, resp)
		}
		waitPendingOf(t, l.pending, ip, 0, "after the refused upgrade")
		h.Del("Origin")
		ws, _, err := d.Dial(url, h)
		if err != nil {
			t.Fatalf("%s could not upgrade again: %v", ip, err)
		}
		defer ws.Close()
		waitPendingOf(t, l.pending, ip, 1, "upgraded")
	})
}

// One host is handed a whole IPv6 /64: its addresses share one count, as
// the per-IP connect limit keys them, and an IPv4-mapped address is its
// IPv4 address. Shown over WebSocket, whose X-Forwarded-For from a trusted
// proxy names any address.
func TestThePendingCapCountsAnIPv6Slash64AsOneAddress(t *testing.T) {
	_, url := startCappedWS(t, 2)
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
	upgrade := func(ip string) int {
		ws, resp, err := d.Dial(url, http.Header{"X-Forwarded-For": {ip}})
		if err == nil {
			t.Cleanup(func() { _ = ws.Close() })
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("upgrade from %s: %v", ip, err)
		}
		return resp.StatusCode
	}
	for _, step := range []struct {
		ip   string
		want int
	}{
		{"2001:db8:1:2::1", http.StatusSwitchingProtocols},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", http.StatusSwitchingProtocols},
		{"2001:db8:1:2::3", http.StatusTooManyRequests}, // the same /64
		{"2001:db8:1:3::1", http.StatusSwitchingProtocols},
		{"198.51.100.9", http.StatusSwitchingProtocols},
		{"::ffff:198.51.100.9", http.StatusSwitchingProtocols},
		{"198.51.100.9", http.StatusTooManyRequests}, // the mapped one was it
	} {
		if got := upgrade(step.ip); got != step.want {
			t.Fatalf("an upgrade from %s: HTTP %d, want %d", step.ip, got, step.want)
		}
	}
}

// startCappedWS starts a broker with a WebSocket listener capping each
// address at max connections awaiting their CONNECT, 127.0.0.1 a trusted
// proxy (its X-Forwarded-For names the client), and returns the listener
// and its /mqtt URL.
func startCappedWS(t *testing.T, max int) (*WSListener, string) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	srv := mqtt.New(&mqtt.Options{Logger: log})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := NewWSListener("w", nil, log)
	l.clients, l.pending = &srv.Listeners.ClientsWg, newPendingConnects(max, nil)
	l.trusted = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(l)
	if err := srv.Serve(); err != nil {
		hs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.pending.cutAll(); _ = srv.Close(); hs.Close() })
	return l, "ws" + strings.TrimPrefix(hs.URL, "http") + "/mqtt"
}
