package server_test

import (
	"crypto/tls"
	"crypto/x509"
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

// serverCert writes a server certificate for 127.0.0.1 that a test CA
// issued, and returns the paths and a pool trusting that CA.
func serverCert(t *testing.T) (certPath, keyPath string, roots *x509.CertPool) {
	t.Helper()
	ca := newCA(t, "chatd test CA")
	certPEM, keyPEM, _ := ca.issue(t, "chatd test", true)
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, data := range map[string][]byte{certPath: certPEM, keyPath: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath, ca.pool()
}

func TestTLSServesMQTTHTTPAndSecureWebSocket(t *testing.T) {
	t.Parallel()
	certPath, keyPath, roots := serverCert(t)
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
