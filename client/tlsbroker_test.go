package client_test

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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// The client dials chatd over MQTT with TLS (mqtts://) and over secure
// WebSocket (wss://), checking the server's certificate against
// Config.TLS, and sends and receives there.
func TestTheClientConnectsOverMQTTSAndSecureWebSocket(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chatd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
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
