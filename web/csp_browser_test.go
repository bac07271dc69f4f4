package web

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
)

// cspSpec probes the page's policy with WebSockets to other hosts, whose
// refusals the other specs sharing TestBrowserE2E's chatd would not expect.
const cspSpec = "csp.spec.mjs"

// TestTheWebClientChatsUnderItsPolicyAndReachesNoOtherWebSocketHost runs
// web/e2e/csp.spec.mjs in headless Chromium, over http_addr (ws:) and
// https_addr (wss:): connect-src names the page's own origin, which covers
// its MQTT WebSocket, and no other WebSocket host; Permissions-Policy
// denies the page the camera, the microphone and the location.
func TestTheWebClientChatsUnderItsPolicyAndReachesNoOtherWebSocketHost(t *testing.T) {
	chromium, node := browserTools(t)
	cert, key := selfSignedCert(t)
	httpsAddr := testkit.FreeAddr(t)
	base := startChatd(t, buildChatd(t), "CHAT_HTTPS_ADDR="+httpsAddr, "CHAT_TLS_CERT="+cert, "CHAT_TLS_KEY="+key)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", cspSpec), "e2e "+cspSpec+": ",
		"CHATD_URL="+base, "CHATD_HTTPS_URL=https://"+httpsAddr, "CHROMIUM_PATH="+chromium); err != nil {
		t.Fatalf("browser test %s failed: %v", cspSpec, err)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key as PEM
// files.
func selfSignedCert(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
