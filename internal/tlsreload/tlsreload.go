// Package tlsreload serves a TLS certificate and key from PEM files and
// picks up new ones without a restart: Let's Encrypt renewals, cert-manager
// secrets and the like.
//
// A Reloader is consulted for every TLS handshake (tls.Config
// GetCertificate). At most once a second a handshake looks at the files'
// size, modification time and identity; when they changed, the pair is
// loaded again. Reload does the same at once (chatd calls it on SIGHUP). A
// pair that does not load, such as a certificate already renewed whose key
// is not yet written, leaves the previous certificate in use and is logged;
// the next check tries again. Connections established earlier are never
// touched: only new handshakes get the new certificate.
//
// A Reloader owns no goroutine and is safe for concurrent use.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"
)

// CheckInterval is how often, at most, handshakes look at the files.
const CheckInterval = time.Second

// Reloader holds the current certificate of one cert/key pair.
type Reloader struct {
	certPath, keyPath string
	w                 watch[tls.Certificate]
}

// New loads the pair once; an error here is a start-up error.
func New(certPath, keyPath string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certPath: certPath, keyPath: keyPath}
	r.w = watch[tls.Certificate]{what: "TLS certificate", paths: []string{certPath, keyPath}, log: log,
		load: r.load, loaded: r.loaded}
	if err := r.w.start(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(r.certPath, r.keyPath)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", r.certPath, r.keyPath, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
			cert.Leaf = leaf
		}
	}
	return &cert, nil
}

func (r *Reloader) loaded(old, cert *tls.Certificate) {
	if old == nil {
		return // the start, which chatd's listener lines report
	}
	attrs := []any{"cert", r.certPath}
	if cert.Leaf != nil {
		attrs = append(attrs, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		if old.Leaf != nil && old.Leaf.SerialNumber.Cmp(cert.Leaf.SerialNumber) == 0 {
			attrs = append(attrs, "unchanged", true)
		}
	}
	r.w.log.Info("TLS certificate loaded", attrs...)
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.w.get(), nil
}

// Reload loads the pair now, changed or not (SIGHUP). On error the previous
// certificate stays in use.
func (r *Reloader) Reload() error { return r.w.check(true) }

// Certificate is the certificate new handshakes get.
func (r *Reloader) Certificate() *tls.Certificate { return r.w.cur.Load() }

// NotAfter is when the current certificate expires.
func (r *Reloader) NotAfter() time.Time {
	if c := r.w.cur.Load(); c != nil && c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// Reloads counts the loads after the first.
func (r *Reloader) Reloads() int64 { return r.w.reloads.Load() }

// LastError is the error of the last load attempt, nil when it worked.
func (r *Reloader) LastError() error { return r.w.lastErr() }
