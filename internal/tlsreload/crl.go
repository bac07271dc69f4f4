package tlsreload

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// CRL holds the certificate revocation lists of the client CAs, read from
// one file: PEM "X509 CRL" blocks or a single DER list, as
// openssl ca -gencrl writes them. Every list must be signed by one of the
// CAs in force when the file is loaded; a file with one that is not does
// not load, and is tried again at the next check even if unchanged, so a
// list of a CA that is being added loads once the CA is. The file is watched as
// a Reloader watches its pair: Check (at most once a CheckInterval) and
// Reload load it again, and a file that does not load leaves the previous
// lists in force.
//
// A list past its NextUpdate stays in force: its revocations are no less
// true for being old, and neither accepting every certificate nor refusing
// every one is safer. It is logged once, at warn; NextUpdate is there for
// an alert.
type CRL struct {
	path string
	cas  func() []*x509.Certificate // the client CAs in force
	w    watch[crlSet]
}

// crlSet is the lists of one load.
type crlSet struct {
	// revoked holds the serials each CA's lists name, by the CA's raw
	// subject.
	revoked map[string]map[string]bool
	// nextUpdate is the earliest NextUpdate of the lists (zero: none
	// says one).
	nextUpdate  time.Time
	lists       int
	staleWarned atomic.Bool
}

// NewCRL loads the lists of path, which CAs of cas() (the client CAs in
// force, ClientCAs.Certificates) must have signed; an error here is a
// start-up error.
func NewCRL(path string, cas func() []*x509.Certificate, log *slog.Logger) (*CRL, error) {
	c := &CRL{path: path, cas: cas}
	c.w = watch[crlSet]{what: "client CRL", paths: []string{path}, log: log, load: c.load, loaded: c.loaded}
	if err := c.w.start(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *CRL) load() (*crlSet, error) {
	raw, err := os.ReadFile(c.path)
	if err != nil {
		return nil, fmt.Errorf("read client CRL: %w", err)
	}
	ders, err := crlDERs(raw)
	if err != nil {
		return nil, fmt.Errorf("client CRL %s: %w", c.path, err)
	}
	set := &crlSet{revoked: map[string]map[string]bool{}, lists: len(ders)}
	for i, der := range ders {
		l, err := x509.ParseRevocationList(der)
		if err != nil {
			return nil, fmt.Errorf("client CRL %s: list %d: %w", c.path, i+1, err)
		}
		ca, err := c.signer(l)
		if err != nil {
			return nil, fmt.Errorf("client CRL %s: list %d (issuer %s): %w", c.path, i+1, l.Issuer, err)
		}
		serials := set.revoked[string(ca.RawSubject)]
		if serials == nil {
			serials = map[string]bool{}
			set.revoked[string(ca.RawSubject)] = serials
		}
		for _, e := range l.RevokedCertificateEntries {
			serials[e.SerialNumber.String()] = true
		}
		if !l.NextUpdate.IsZero() && (set.nextUpdate.IsZero() || l.NextUpdate.Before(set.nextUpdate)) {
			set.nextUpdate = l.NextUpdate
		}
	}
	return set, nil
}

// crlDERs splits a CRL file into its lists: every PEM "X509 CRL" block,
// or the whole file as one DER list.
func crlDERs(raw []byte) ([][]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("the file is empty; give the CRLs of the client CAs (openssl ca -gencrl)")
	}
	if !bytes.Contains(raw, []byte("-----BEGIN")) {
		return [][]byte{raw}, nil
	}
	var out [][]byte
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "X509 CRL" {
			out = append(out, b.Bytes)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`no PEM "X509 CRL" block found; give the CRLs of the client CAs (openssl ca -gencrl)`)
	}
	return out, nil
}

// signer is the CA whose subject is l's issuer and whose key signed l.
func (c *CRL) signer(l *x509.RevocationList) (*x509.Certificate, error) {
	var last error
	for _, ca := range c.cas() {
		if !bytes.Equal(ca.RawSubject, l.RawIssuer) {
			continue
		}
		if last = l.CheckSignatureFrom(ca); last == nil {
			return ca, nil
		}
	}
	if last != nil {
		return nil, fmt.Errorf("not signed by the client CA of that name: %w", last)
	}
	return nil, errors.New("not issued by any CA of mqtts_client_ca")
}

func (c *CRL) loaded(_, cur *crlSet) {
	n := 0
	for _, s := range cur.revoked {
		n += len(s)
	}
	attrs := []any{"file", c.path, "lists", cur.lists, "revoked", n}
	if !cur.nextUpdate.IsZero() {
		attrs = append(attrs, "next_update", cur.nextUpdate.UTC().Format(time.RFC3339))
	}
	c.w.log.Info("client CRL loaded", attrs...)
}

// Revoked reports whether the lists of cert's issuer, the CA that signed
// it in its verified chain, name cert's serial.
func (c *CRL) Revoked(cert, issuer *x509.Certificate) bool {
	set := c.w.cur.Load()
	return set.revoked[string(issuer.RawSubject)][cert.SerialNumber.String()]
}

// Check loads the file again if it changed and the last look is
// CheckInterval old, and warns (once per load) when the lists are past
// their NextUpdate.
func (c *CRL) Check() {
	set := c.w.get()
	if nu := set.nextUpdate; !nu.IsZero() && c.w.now().After(nu) && !set.staleWarned.Swap(true) {
		c.w.log.Warn("client CRL is past its NextUpdate; its revocations stay in force: publish a new one (openssl ca -gencrl)",
			"file", c.path, "next_update", nu.UTC().Format(time.RFC3339))
	}
}

// Reload loads the file now, changed or not (SIGHUP). On error the
// previous lists stay in force.
func (c *CRL) Reload() error { return c.w.check(true) }

// Reloads counts the loads after the first: a change is a new count.
func (c *CRL) Reloads() int64 { return c.w.reloads.Load() }

// NextUpdate is the earliest NextUpdate of the lists in force (zero: none
// says one).
func (c *CRL) NextUpdate() time.Time { return c.w.cur.Load().nextUpdate }

// LastError is the error of the last load attempt, nil when it worked.
func (c *CRL) LastError() error { return c.w.lastErr() }
