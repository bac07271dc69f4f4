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
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CheckInterval is how often, at most, handshakes look at the files.
const CheckInterval = time.Second

// Reloader holds the current certificate of one cert/key pair.
type Reloader struct {
	certPath, keyPath string
	log               *slog.Logger
	now               func() time.Time

	cur       atomic.Pointer[tls.Certificate]
	nextCheck atomic.Int64 // unix nanos

	mu        sync.Mutex // serialises loads
	stamp     [2]fileStamp
	badStamp  [2]fileStamp // the last pair that failed, logged once
	reloads   atomic.Int64
	lastError atomic.Pointer[string]
}

type fileStamp struct {
	size  int64
	mtime time.Time
	info  os.FileInfo
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil
	}
	return a.size == b.size && a.mtime.Equal(b.mtime) && os.SameFile(a.info, b.info)
}

// New loads the pair once; an error here is a start-up error.
func New(certPath, keyPath string, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Reloader{certPath: certPath, keyPath: keyPath, log: log, now: time.Now}
	st, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, err := r.load()
	if err != nil {
		return nil, err
	}
	r.stamp = st
	r.cur.Store(cert)
	r.nextCheck.Store(r.now().Add(CheckInterval).UnixNano())
	return r, nil
}

func (r *Reloader) stat() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, p := range []string{r.certPath, r.keyPath} {
		fi, err := os.Stat(p) // follows symlinks: certbot's live/ links
		if err != nil {
			return out, fmt.Errorf("read TLS certificate: %w", err)
		}
		out[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime(), info: fi}
	}
	return out, nil
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

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if now := r.now().UnixNano(); now >= r.nextCheck.Load() {
		r.nextCheck.Store(now + int64(CheckInterval))
		r.check(false)
	}
	return r.cur.Load(), nil
}

// Reload loads the pair now, changed or not (SIGHUP). On error the previous
// certificate stays in use.
func (r *Reloader) Reload() error { return r.check(true) }

// check reloads when forced or when the files changed since the last load.
func (r *Reloader) check(force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.stat()
	if err == nil && !force && st[0].same(r.stamp[0]) && st[1].same(r.stamp[1]) {
		// The files are those of the certificate in use: a broken
		// renewal that was moved back is no longer failing.
		if r.lastError.Swap(nil) != nil {
			r.badStamp = [2]fileStamp{}
			r.log.Info("TLS certificate files are those in use again", "cert", r.certPath)
		}
		return nil
	}
	var cert *tls.Certificate
	if err == nil {
		cert, err = r.load()
	}
	if err != nil {
		msg := err.Error()
		r.lastError.Store(&msg)
		if force || !st[0].same(r.badStamp[0]) || !st[1].same(r.badStamp[1]) {
			r.badStamp = st
			r.log.Warn("TLS certificate not reloaded; the previous one stays in use", "cert", r.certPath, "err", err)
		}
		return err
	}
	r.stamp, r.badStamp = st, [2]fileStamp{}
	r.lastError.Store(nil)
	old := r.cur.Swap(cert)
	r.reloads.Add(1)
	attrs := []any{"cert", r.certPath}
	if cert.Leaf != nil {
		attrs = append(attrs, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		if old != nil && old.Leaf != nil && old.Leaf.SerialNumber.Cmp(cert.Leaf.SerialNumber) == 0 {
			attrs = append(attrs, "unchanged", true)
		}
	}
	r.log.Info("TLS certificate loaded", attrs...)
	return nil
}

// Certificate is the certificate new handshakes get.
func (r *Reloader) Certificate() *tls.Certificate { return r.cur.Load() }

// NotAfter is when the current certificate expires.
func (r *Reloader) NotAfter() time.Time {
	if c := r.cur.Load(); c != nil && c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// Reloads counts the loads after the first.
func (r *Reloader) Reloads() int64 { return r.reloads.Load() }

// LastError is the error of the last load attempt, nil when it worked.
func (r *Reloader) LastError() error {
	if p := r.lastError.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}
