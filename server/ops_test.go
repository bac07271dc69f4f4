package server_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/pires/go-proxyproto"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// testCA issues certificates for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a certificate for cn: a server certificate for 127.0.0.1,
// or a client one. It returns the PEM cert and key and the tls pair.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	return ca.issueUntil(t, cn, server, time.Now().Add(24*time.Hour))
}

// issueUntil is issue for a certificate that expires at notAfter.
func (ca *testCA) issueUntil(t *testing.T, cn string, server bool, notAfter time.Time) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	return ca.issueValid(t, cn, server, time.Now().Add(-time.Hour), notAfter)
}

// issueValid is issue for a certificate valid from notBefore (whole
// seconds: X.509 keeps no fractions) to notAfter.
func (ca *testCA) issueValid(t *testing.T, cn string, server bool, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// replaceFile swaps in new content by rename, as certbot and Kubernetes
// secret updates do.
func replaceFile(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedCN is the Common Name of the certificate a new TLS handshake with
// addr gets.
func servedCN(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// tlsNode starts a node with MQTT over TLS and HTTPS on a certificate of
// ca for "cn", returning the node and the certificate's paths.
func tlsNode(t *testing.T, ca *testCA, cn string, env map[string]string) (srv *server.Server, certPath, keyPath string) {
	t.Helper()
	return tlsNodeOn(t, pgtest.NewDB(t), ca, cn, env)
}

// tlsNodeOn is tlsNode on the database at url.
func tlsNodeOn(t *testing.T, url string, ca *testCA, cn string, env map[string]string) (srv *server.Server, certPath, keyPath string) {
	t.Helper()
	c, k, _ := ca.issue(t, cn, true)
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	replaceFile(t, certPath, c)
	replaceFile(t, keyPath, k)
	all := map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_MQTTS_ADDR": "127.0.0.1:0", "CHAT_HTTPS_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		all[k] = v
	}
	return startNode(t, url, all), certPath, keyPath
}

func TestTLSCertificateReloadsWhenItsFilesChangeAndLiveConnectionsStayUp(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "test CA")
	c1, k1, _ := ca.issue(t, "chatd 2025", true)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	replaceFile(t, certPath, c1)
	replaceFile(t, keyPath, k1)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_MQTTS_ADDR": "127.0.0.1:0", "CHAT_HTTPS_ADDR": "127.0.0.1:0"})
	roots := ca.pool()
	if cn := servedCN(t, srv.MQTTSAddr(), roots); cn != "chatd 2025" {
		t.Fatalf("mqtts serves %q", cn)
	}
	conv := mustDirect(t, t.Context(), srv, 1, 2)
	tlsCfg := &tls.Config{RootCAs: roots}
	listener, sender := overTLS(t, srv, tlsCfg, "reload-2", "reload-1")

	// The renewal lands: key first, then the certificate, as certbot's
	// symlink swap or a copy does.
	c2, k2, _ := ca.issue(t, "chatd 2026", true)
	replaceFile(t, keyPath, k2)
	replaceFile(t, certPath, c2)
	testkit.WaitFor(t, 10*time.Second, "both TLS listeners to serve the renewed certificate", func() bool {
		return servedCN(t, srv.MQTTSAddr(), roots) == "chatd 2026" && servedCN(t, srv.HTTPSAddr(), roots) == "chatd 2026"
	})

	// The connections made before the renewal still work, both ways.
	if ack, err := sender.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "after renewal")); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send after renewal: 0x%02x %v", ack.ReasonCode, err)
	}
	if ev := nextEvent(t, listener, "message.new", 10*time.Second); ev.Body != "after renewal" {
		t.Fatalf("got %+v", ev)
	}

	// A renewal that does not load keeps the current certificate.
	replaceFile(t, keyPath, []byte("-----BEGIN EC PRIVATE KEY-----\nbroken\n-----END EC PRIVATE KEY-----\n"))
	testkit.WaitFor(t, 10*time.Second, "chat_tls_certificate_reload_failing to be 1", func() bool {
		return scrape(t, srv.HTTPAddr())["chat_tls_certificate_reload_failing"] == 1
	})
	if cn := servedCN(t, srv.MQTTSAddr(), roots); cn != "chatd 2026" {
		t.Fatalf("after a broken renewal mqtts serves %q", cn)
	}
	// ReloadTLS (SIGHUP) reports it.
	if err := srv.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS accepted a broken key")
	}
	replaceFile(t, keyPath, k2)
	if err := srv.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS: %v", err)
	}
	if m := scrape(t, srv.HTTPAddr()); m["chat_tls_certificate_reload_failing"] != 0 || m["chat_tls_certificate_expiry_timestamp_seconds"] < float64(time.Now().Unix()) {
		t.Fatalf("after the fix: failing %v, expiry %v", m["chat_tls_certificate_reload_failing"], m["chat_tls_certificate_expiry_timestamp_seconds"])
	}
}

// dialCert connects over MQTT over TLS presenting client (nil: none).
func dialCert(t *testing.T, addr string, roots *x509.CertPool, client *tls.Certificate, o mqtttest.Options) (*mqtttest.Client, packets.Packet, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	raw, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, packets.Packet{}, err
	}
	c, ack, err := mqtttest.DialConn(raw, o)
	if err == nil {
		t.Cleanup(c.Drop)
	}
	return c, ack, err
}

func TestClientCertificateAuthenticatesDevicesAsTheUserInItsCommonName(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	srv, _ := clientCANode(t, serverCA, nil, deviceCA)
	node := srv
	roots := serverCA.pool()
	_, _, dev7 := deviceCA.issue(t, "7", false)

	// A device with a certificate for CN=7 and no password is user 7.
	c7, _, err := dialCert(t, node.MQTTSAddr(), roots, &dev7, mqtttest.Options{Version: 5, ClientID: "device-7", Clean: true})
	if err != nil {
		t.Fatalf("device with a certificate: %v", err)
	}
	if codes, err := c7.Subscribe(testnode.EventsTopic(7)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("user 7's events: %v %v", codes, err)
	}
	if codes, err := c7.Subscribe(testnode.EventsTopic(8)); err != nil || codes[0] < 0x80 {
		t.Fatalf("user 8's events were granted to the certificate of user 7: %v %v", codes, err)
	}
	// Optional mode: a client without a certificate uses its JWT.
	c8, _, err := dialCert(t, node.MQTTSAddr(), roots, nil, mqtttest.Options{Version: 5, ClientID: "phone-8", Password: testnode.Token(t, 8), Clean: true})
	if err != nil {
		t.Fatalf("JWT client on the mTLS listener: %v", err)
	}
	if codes, err := c8.Subscribe(testnode.EventsTopic(8)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe 8: %v %v", codes, err)
	}
	// The certificate decides, not the password: a token for 8 beside
	// the certificate of 7 is still user 7; a username of 8 is refused.
	c7b, _, err := dialCert(t, node.MQTTSAddr(), roots, &dev7, mqtttest.Options{Version: 5, ClientID: "device-7b", Password: testnode.Token(t, 8), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	if codes, _ := c7b.Subscribe(testnode.EventsTopic(8)); codes[0] < 0x80 {
		t.Fatal("a password overrode the client certificate")
	}
	if _, ack, err := dialCert(t, node.MQTTSAddr(), roots, &dev7, mqtttest.Options{Version: 5, ClientID: "device-7c", Username: "8", Clean: true}); err == nil || ack.ReasonCode != 0x86 {
		t.Fatalf("username 8 with the certificate of 7: %v reason 0x%02x, want 0x86", err, ack.ReasonCode)
	}
	// A verified certificate whose CN is no user id is refused.
	_, _, sensor := deviceCA.issue(t, "sensor-basement", false)
	if _, ack, err := dialCert(t, node.MQTTSAddr(), roots, &sensor, mqtttest.Options{Version: 5, ClientID: "sensor", Password: testnode.Token(t, 9), Clean: true}); err == nil || ack.ReasonCode != 0x86 {
		t.Fatalf("CN sensor-basement: %v reason 0x%02x, want 0x86", err, ack.ReasonCode)
	}
	// A certificate of another CA never gets as far as MQTT.
	_, _, forged := newCA(t, "rogue CA").issue(t, "7", false)
	if c, _, err := dialCert(t, node.MQTTSAddr(), roots, &forged, mqtttest.Options{Version: 5, ClientID: "forged", Clean: true}); err == nil {
		c.Drop()
		t.Fatal("a certificate of an unknown CA was accepted")
	}
}

func TestRequiredClientCertificateRefusesClientsWithoutOne(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	srv, _ := clientCANode(t, serverCA, map[string]string{"CHAT_MQTTS_CLIENT_AUTH": "require"}, deviceCA)
	addr := srv.MQTTSAddr()
	if c, _, err := dialCert(t, addr, serverCA.pool(), nil, mqtttest.Options{Version: 5, ClientID: "jwt-only", Password: testnode.Token(t, 3), Clean: true}); err == nil {
		c.Drop()
		t.Fatal("require: a client without a certificate was accepted")
	}
	_, _, dev := deviceCA.issue(t, "3", false)
	if _, _, err := dialCert(t, addr, serverCA.pool(), &dev, mqtttest.Options{Version: 5, ClientID: "device-3", Clean: true}); err != nil {
		t.Fatalf("require: device with a certificate: %v", err)
	}
}

// proxyHeader is a PROXY protocol header (v1 or v2) from src.
func proxyHeader(version byte, src string) *proxyproto.Header {
	return &proxyproto.Header{Version: version, Command: proxyproto.PROXY, TransportProtocol: proxyproto.TCPv4,
		SourceAddr:      &net.TCPAddr{IP: net.ParseIP(src), Port: 40000},
		DestinationAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1883}}
}

// dialProxied opens a TCP connection to addr and sends h first (nil: no
// header), as a load balancer would.
func dialProxied(t *testing.T, addr string, h *proxyproto.Header) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		if _, err := h.WriteTo(conn); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

func TestProxyProtocolFromTrustedNetworksFeedsTheRealAddressToTheConnectLimit(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "CA")
	logs := &lineLog{level: slog.LevelDebug}
	c, k, _ := ca.issue(t, "chatd", true)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	replaceFile(t, certPath, c)
	replaceFile(t, keyPath, k)
	srv := testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_PROXY_PROTOCOL": "true", "CHAT_PROXY_PROTOCOL_TRUSTED": "127.0.0.0/8",
		"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath, "CHAT_MQTTS_ADDR": "127.0.0.1:0",
		"CHAT_LIMIT_CONNECT_RATE": "0.001", "CHAT_LIMIT_CONNECT_BURST": "1"}), logs.handler())

	// 203.0.113.7 connects through the load balancer (v2 header): its one
	// connect of the burst.
	a, _, err := mqtttest.DialConn(dialProxied(t, srv.MQTTAddr(), proxyHeader(2, "203.0.113.7")),
		mqtttest.Options{Version: 5, ClientID: "a", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatalf("first client through the proxy: %v", err)
	}
	defer a.Drop()
	// The same client again (v1 header): its address is over the limit,
	// though the TCP peer is the load balancer as before.
	if _, ack, err := mqtttest.DialConn(dialProxied(t, srv.MQTTAddr(), proxyHeader(1, "203.0.113.7")),
		mqtttest.Options{Version: 5, ClientID: "a2", Password: testnode.Token(t, 1), Clean: true}); err == nil || ack.ReasonCode != 0x9F {
		t.Fatalf("same client address again: %v reason 0x%02x, want 0x9F", err, ack.ReasonCode)
	}
	// And over TLS: the header comes before the handshake.
	raw := dialProxied(t, srv.MQTTSAddr(), proxyHeader(2, "203.0.113.7"))
	if _, ack, err := mqtttest.DialConn(tls.Client(raw, &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"}),
		mqtttest.Options{Version: 5, ClientID: "a3", Password: testnode.Token(t, 1), Clean: true}); err == nil || ack.ReasonCode != 0x9F {
		t.Fatalf("same client address over mqtts: %v reason 0x%02x, want 0x9F", err, ack.ReasonCode)
	}
	// Another client behind the same load balancer has its own budget.
	b, _, err := mqtttest.DialConn(dialProxied(t, srv.MQTTAddr(), proxyHeader(2, "198.51.100.9")),
		mqtttest.Options{Version: 4, ClientID: "b", Password: testnode.Token(t, 2), Clean: true})
	if err != nil {
		t.Fatalf("second client through the proxy: %v", err)
	}
	defer b.Drop()
	// A trusted peer that sends no header (a health check) is itself.
	direct, _, err := mqtttest.DialConn(dialProxied(t, srv.MQTTAddr(), nil), mqtttest.Options{Version: 5, ClientID: "d", Password: testnode.Token(t, 3), Clean: true})
	if err != nil {
		t.Fatalf("direct client from a trusted network: %v", err)
	}
	direct.Drop()
	if !strings.Contains(logs.String(), "remote=203.0.113.7:40000") {
		t.Fatalf("the refusal was not logged with the client's real address:\n%s", logs.String())
	}
}

func TestProxyHeadersFromUntrustedNetworksCloseTheConnection(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_PROXY_PROTOCOL": "true", "CHAT_PROXY_PROTOCOL_TRUSTED": "10.0.0.0/8"})
	if c, _, err := mqtttest.DialConn(dialProxied(t, srv.MQTTAddr(), proxyHeader(2, "10.1.2.3")),
		mqtttest.Options{Version: 5, ClientID: "spoof", Password: testnode.Token(t, 1), Clean: true}); err == nil {
		c.Drop()
		t.Fatal("a PROXY header from an untrusted address was accepted")
	}
	c, _, err := mqtttest.DialConn(dialProxied(t, srv.MQTTAddr(), nil), mqtttest.Options{Version: 5, ClientID: "plain", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatalf("a direct client from an untrusted address: %v", err)
	}
	c.Drop()
}

func TestMetricsListenerServesMetricsAndThePublicListenerNoLonger(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_METRICS_ADDR": "127.0.0.1:0"})
	if srv.MetricsAddr() == "" {
		t.Fatal("no metrics listener")
	}
	m := scrape(t, srv.MetricsAddr())
	if m["chat_pg_up"] != 1 {
		t.Fatalf("chat_pg_up = %v on the metrics listener", m["chat_pg_up"])
	}
	found := false
	for k, v := range m {
		if strings.HasPrefix(k, "chat_build_info{") && v == 1 {
			found = true
		}
	}
	if !found {
		t.Fatal("no chat_build_info on the metrics listener")
	}
	for addr, want := range map[string]int{
		srv.HTTPAddr() + "/metrics":     http.StatusNotFound,
		srv.MetricsAddr() + "/healthz":  http.StatusOK,
		srv.MetricsAddr() + "/readyz":   http.StatusOK,
		srv.MetricsAddr() + "/v1/inbox": http.StatusNotFound,
		srv.MetricsAddr() + "/":         http.StatusNotFound,
	} {
		resp, err := http.Get("http://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", addr, resp.StatusCode, want)
		}
	}
}

func TestMetricsCountHTTPRequestsByRouteAndMQTTConnectionsByTransport(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "CA")
	srv, _, _ := tlsNode(t, ca, "chatd", nil)
	get := func(path string, user int64) {
		req, _ := http.NewRequest("GET", "http://"+srv.HTTPAddr()+path, nil)
		if user > 0 {
			req.Header.Set("Authorization", "Bearer "+testnode.Token(t, user))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/healthz", 0)
	get("/v1/inbox", 1)
	get("/v1/inbox", 1)
	get("/v1/inbox", 0)
	get("/v1/conversations/424242", 1)
	get("/v1/no-such-route", 1)

	dial := func(v byte, id string) *mqtttest.Client {
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: id, Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tcp5, tcp4 := dial(5, "tcp5"), dial(4, "tcp4")
	defer tcp4.Drop()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+srv.HTTPAddr()+"/mqtt", http.Header{"Sec-WebSocket-Protocol": {"mqtt"}})
	if err != nil {
		t.Fatal(err)
	}
	ws5, _, err := mqtttest.DialConn(mqtttest.WrapWS(ws), mqtttest.Options{Version: 5, ClientID: "ws5", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ws5.Drop()
	tls5, _, err := dialCert(t, srv.MQTTSAddr(), ca.pool(), nil, mqtttest.Options{Version: 5, ClientID: "tls5", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = tls5
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}
	wss, _, err := d.Dial("wss://"+srv.HTTPSAddr()+"/mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	wss4, _, err := mqtttest.DialConn(mqtttest.WrapWS(wss), mqtttest.Options{Version: 4, ClientID: "wss4", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer wss4.Drop()
	// A refused connection never counts.
	if _, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "bad", Password: "nope", Clean: true}); err == nil {
		t.Fatal("bad token accepted")
	}

	want := map[string]float64{
		`chat_http_requests_total{code="200",route="GET /healthz"}`:                               1,
		`chat_http_requests_total{code="200",route="GET /v1/inbox"}`:                              2,
		`chat_http_requests_total{code="401",route="GET /v1/inbox"}`:                              1,
		`chat_http_requests_total{code="404",route="GET /v1/conversations/{id}"}`:                 1,
		`chat_http_requests_total{code="404",route="unmatched"}`:                                  1,
		`chat_http_requests_total{code="101",route="/mqtt"}`:                                      2, // ws and wss
		`chat_http_request_duration_seconds_count{code="200",route="GET /v1/inbox"}`:              2,
		`chat_mqtt_connections_by_transport{protocol="5",transport="tcp"}`:                        1,
		`chat_mqtt_connections_by_transport{protocol="3.1.1",transport="tcp"}`:                    1,
		`chat_mqtt_connections_by_transport{protocol="5",transport="ws"}`:                         1,
		`chat_mqtt_connections_by_transport{protocol="5",transport="tls"}`:                        1,
		`chat_mqtt_connections_by_transport{protocol="3.1.1",transport="wss"}`:                    1,
		`chat_mqtt_sessions_established_total{protocol="5",transport="tcp"}`:                      1,
		`chat_http_request_duration_seconds_count{code="404",route="GET /v1/conversations/{id}"}`: 1,
	}
	var m map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, srv.HTTPAddr())
		var wrong []string
		for k, v := range want {
			if m[k] != v {
				wrong = append(wrong, fmt.Sprintf("%s = %v, want %v", k, m[k], v))
			}
		}
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for k, v := range m {
				if strings.HasPrefix(k, "chat_http_requests_total") {
					wrong = append(wrong, fmt.Sprintf("have %s = %v", k, v))
				}
			}
			t.Fatalf("metrics:\n%s", strings.Join(wrong, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, timed := m[`chat_http_request_duration_seconds_count{code="101",route="/mqtt"}`]; timed {
		t.Error("WebSocket sessions are timed as HTTP requests")
	}
	tcp5.Disconnect()
	testkit.WaitFor(t, 10*time.Second, "the tcp v5 connection to be uncounted", func() bool {
		return scrape(t, srv.HTTPAddr())[`chat_mqtt_connections_by_transport{protocol="5",transport="tcp"}`] == 0
	})
}

// lineLog collects a node's log lines (text format).
type lineLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	h     slog.Handler
	level slog.Level // zero: info
}

func (l *lineLog) handler() slog.Handler {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		l.h = slog.NewTextHandler(lockedWriter{l}, &slog.HandlerOptions{Level: l.level})
	}
	return l.h
}

type lockedWriter struct{ l *lineLog }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.buf.Write(p)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestReadyLineNamesVersionWebURLAndWhereTheSecretLives(t *testing.T) {
	t.Parallel()
	logs := &lineLog{}
	env := nodeEnv(t, pgtest.NewDB(t), map[string]string{"CHAT_LOG_LEVEL": "info"})
	delete(env, "CHAT_JWT_SECRET")
	srv := testnode.Start(t, env, logs.handler())
	out := logs.String()
	secret := filepath.Join(env["CHAT_DATA_DIR"], "jwt.secret")
	for _, want := range []string{
		`msg=listening listener=mqtt addr=` + srv.MQTTAddr() + ` serves="MQTT 3.1.1 and 5 over TCP"`,
		`msg=listening listener=http addr=` + srv.HTTPAddr() + ` serves="HTTP API /v1, web client /, MQTT over WebSocket /mqtt, /healthz, /readyz, /metrics"`,
		`msg="chatd ready" version=`,
		`web=http://` + srv.HTTPAddr() + `/`,
		`jwt_secret=` + secret,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, noise := range []string{"added hook", "attached listener", "mochi mqtt starting"} {
		if strings.Contains(out, noise) {
			t.Errorf("mochi's %q is logged at info:\n%s", noise, out)
		}
	}
}

func TestIdentityProviderTokensFromAJWKSAuthenticateMQTTAndHTTP(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_JWKS_URL": testkit.JWKSServer(t, key, "kc-1"),
		"CHAT_JWT_ISSUER": "https://idp.example/realms/chat", "CHAT_JWT_AUDIENCE": "chatd", "CHAT_JWT_USER_CLAIM": "chat_uid"})
	idpToken := func(aud string, uid any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
			"iss": "https://idp.example/realms/chat", "aud": aud, "chat_uid": uid, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = "kc-1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "kc-21", Password: idpToken("chatd", 21), Clean: true})
	if err != nil {
		t.Fatalf("MQTT with a provider token: %v", err)
	}
	defer c.Drop()
	if codes, err := c.Subscribe(testnode.EventsTopic(21)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("user 21's events: %v %v", codes, err)
	}
	if _, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "kc-x", Password: idpToken("another-app", 21), Clean: true}); err == nil || ack.ReasonCode != 0x86 {
		t.Fatalf("token for another audience: %v 0x%02x, want 0x86", err, ack.ReasonCode)
	}
	for tok, want := range map[string]int{idpToken("chatd", "21"): http.StatusOK, idpToken("chatd", "alice"): http.StatusUnauthorized, testnode.Token(t, 21): http.StatusOK} {
		req, _ := http.NewRequest("GET", "http://"+srv.HTTPAddr()+"/v1/inbox", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/inbox: %d, want %d", resp.StatusCode, want)
		}
	}
}

// While the identity provider's key set cannot be fetched, its tokens were
// refused as bad (CONNACK 0x86, HTTP 401), and a client holding a token it
// cannot renew (the Go SDK's static Token) gave it up for good. They are
// answered "retry later" now: CONNACK 0x88 (3.1.1: 0x03) and HTTP 503 with
// Retry-After; a token that is bad whatever the keys say is still 0x86.
func TestAnIdentityProvidersTokenIsAnsweredRetryLaterWhileItsKeysCannotBeFetched(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_JWKS_URL": down.URL + "/certs", "CHAT_JWT_AUDIENCE": "chatd"})
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "21", "aud": "chatd", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "kc-1"
	idpToken, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}

	if _, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "kc-21", Password: idpToken, Clean: true}); err == nil || ack.ReasonCode != 0x88 {
		t.Errorf("v5 CONNECT with a provider token while its keys cannot be fetched: %v 0x%02x, want 0x88", err, ack.ReasonCode)
	}
	if _, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 4, ClientID: "kc-21", Password: idpToken, Clean: true}); err == nil || ack.ReasonCode != 0x03 {
		t.Errorf("3.1.1 CONNECT: %v 0x%02x, want 0x03", err, ack.ReasonCode)
	}
	if _, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "kc-21", Password: "not.a.token", Clean: true}); err == nil || ack.ReasonCode != 0x86 {
		t.Errorf("v5 CONNECT with a malformed token: %v 0x%02x, want 0x86", err, ack.ReasonCode)
	}
	req, _ := http.NewRequest("GET", "http://"+srv.HTTPAddr()+"/v1/inbox", nil)
	req.Header.Set("Authorization", "Bearer "+idpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"unavailable"`) {
		t.Errorf("GET /v1/inbox: %d Retry-After %q %s, want 503 unavailable with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}
