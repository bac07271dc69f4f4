package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// selfSigned writes a certificate for 127.0.0.1 and returns the paths and a
// pool trusting it.
func selfSigned(t *testing.T) (certPath, keyPath string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chatd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	kb, _ := x509.MarshalECPrivateKey(key)
	_ = os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certPath, keyPath, roots
}

func TestTLSServesMQTTHTTPAndSecureWebSocket(t *testing.T) {
	certPath, keyPath, roots := selfSigned(t)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_MQTTS_ADDR": "127.0.0.1:0", "CHAT_HTTPS_ADDR": "127.0.0.1:0"})
	conv := mustDirect(t, t.Context(), srv, 1, 2)
	tlsCfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}

	// HTTPS
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 5 * time.Second}
	resp, err := hc.Get("https://" + srv.HTTPSAddr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("https healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	// MQTT over TLS and over secure WebSocket
	listener, sender := overTLS(t, srv, tlsCfg, "tls-2", "wss-1")
	ack, err := sender.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "encrypted"))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send over wss: 0x%02x %v", ack.ReasonCode, err)
	}
	if ev := nextEvent(t, listener, chat.EventMessageNew, 5*time.Second); ev.Body != "encrypted" {
		t.Fatalf("got %+v", ev)
	}

	// Plain TCP to the TLS port is refused.
	plain, _, err := mqtttest.Dial(srv.MQTTSAddr(), mqtttest.Options{Version: 5, ClientID: "plain", Password: testnode.Token(t, 1), Clean: true})
	if err == nil {
		plain.Drop()
		t.Fatal("plain MQTT accepted on the TLS port")
	}
	// The plain listeners stay plain beside the TLS ones.
	if resp, err := http.Get("http://" + srv.HTTPAddr() + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("plain http beside https: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	plain, _, err = mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "plain", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatalf("plain MQTT beside MQTT over TLS: %v", err)
	}
	plain.Drop()
}

// overTLS connects user 2 (listener, v3.1.1, subscribed to its events)
// over MQTT over TLS and user 1 (sender, v5) over MQTT over secure
// WebSocket, with the given client ids; both are dropped at the end of
// the test.
func overTLS(t *testing.T, srv *server.Server, cfg *tls.Config, listenerID, senderID string) (listener, sender *mqtttest.Client) {
	t.Helper()
	raw, err := tls.Dial("tcp", srv.MQTTSAddr(), cfg)
	if err != nil {
		t.Fatalf("tls dial mqtt: %v", err)
	}
	listener, _, err = mqtttest.DialConn(raw, mqtttest.Options{Version: 4, ClientID: listenerID, Password: testnode.Token(t, 2), Clean: true})
	if err != nil {
		t.Fatalf("mqtt over tls: %v", err)
	}
	t.Cleanup(listener.Drop)
	if codes, err := listener.Subscribe(testnode.EventsTopic(2)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, TLSClientConfig: cfg, HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial("wss://"+srv.HTTPSAddr()+"/mqtt", nil)
	if err != nil {
		t.Fatalf("wss dial: %v", err)
	}
	sender, _, err = mqtttest.DialConn(mqtttest.WrapWS(ws), mqtttest.Options{Version: 5, ClientID: senderID, Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatalf("mqtt over wss: %v", err)
	}
	t.Cleanup(sender.Drop)
	return listener, sender
}
