package tlsreload_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testcert"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/tlsreload"
)

// A broken renewal rolled back by moving the previous files into place
// again (same files, same modification times) left LastError, and with it
// chat_tls_certificate_reload_failing, set for good: the check saw the
// files of the certificate in use and returned before clearing it. The
// files being those of the certificate in use now clears it.
func TestReloadFailingClearsWhenTheFilesInUseAreMovedBack(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM, keyPEM := testcert.SelfSigned(t, "chatd")
	testcert.WriteFiles(t, certPath, keyPath, certPEM, keyPEM)
	r, err := tlsreload.New(certPath, keyPath, nil)
	if err != nil {
		t.Fatal(err)
	}

	// A renewal that writes a broken certificate beside the key...
	if err := os.Rename(certPath, certPath+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || r.LastError() == nil {
		t.Fatalf("reload of a broken certificate: %v, LastError %v", err, r.LastError())
	}
	// ... rolled back: the previous file, as it was, is the certificate again.
	if err := os.Rename(certPath+".old", certPath); err != nil {
		t.Fatal(err)
	}
	// Handshakes (and scrapes of the metric) look at the files once a
	// second at most.
	testkit.WaitFor(t, 5*time.Second, "LastError cleared after the files in use were moved back", func() bool {
		_, _ = r.GetCertificate(nil)
		return r.LastError() == nil
	})
	if r.Certificate() == nil {
		t.Fatal("no certificate")
	}
}
