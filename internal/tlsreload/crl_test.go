package tlsreload_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/tlsreload"
)

// TestACRLPastItsNextUpdateStaysInForceAndIsWarnedOnce: a CRL whose
// NextUpdate has passed (the CA did not publish a new one in time) keeps
// revoking what it lists, neither accepting every certificate nor refusing
// every one, and is logged at warn once, not at every check.
func TestACRLPastItsNextUpdateStaysInForceAndIsWarnedOnce(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "device CA"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	revoked, kept := &x509.Certificate{SerialNumber: big.NewInt(0x1A2B)}, &x509.Certificate{SerialNumber: big.NewInt(0x1A2C)}
	crlDER, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: time.Now().Add(-24 * time.Hour), NextUpdate: time.Now().Add(-time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: revoked.SerialNumber, RevocationTime: time.Now().Add(-24 * time.Hour)}}}, ca, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "crl.der") // DER, as openssl crl -outform DER writes it
	if err := os.WriteFile(path, crlDER, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer // the test reads it while the CRL writes
	crl, err := tlsreload.NewCRL(path, func() []*x509.Certificate { return []*x509.Certificate{ca} }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		crl.Check()
		if !crl.Revoked(revoked, ca) {
			t.Fatal("a stale CRL no longer revokes the certificate it lists")
		}
		if crl.Revoked(kept, ca) {
			t.Fatal("a stale CRL revokes a certificate it does not list")
		}
	}
	if n := strings.Count(logs.String(), "past its NextUpdate"); n != 1 {
		t.Fatalf("%d warnings of a stale CRL after three checks, want 1:\n%s", n, logs.String())
	}
}
