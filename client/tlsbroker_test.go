package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testcert"
	"github.com/chatd/chatd/internal/testnode"
)

// The client dials chatd over MQTT with TLS (mqtts://) and over secure
// WebSocket (wss://), checking the server's certificate against
// Config.TLS, and sends and receives there.
func TestTheClientConnectsOverMQTTSAndSecureWebSocket(t *testing.T) {
	t.Parallel()
	certPEM, keyPEM := testcert.SelfSigned(t, "chatd test")
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	testcert.WriteFiles(t, certPath, keyPath, certPEM, keyPEM)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("no certificate in the test's PEM")
	}
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_MQTTS_ADDR": "127.0.0.1:0", "CHAT_HTTPS_ADDR": "127.0.0.1:0"}), nil)
	for i, broker := range []string{"mqtts://" + srv.MQTTSAddr(), "wss://" + srv.HTTPSAddr() + "/mqtt"} {
		cfg := testConfig(t, broker, int64(1+i))
		cfg.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		a := connect(t, cfg)
		conv := direct(t, a, 10)
		sendN(t, a, conv, 2, "over "+broker)
		messages(t, a, conv, 2, 10*time.Second)
	}
}
