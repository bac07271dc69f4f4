package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
)

// ClientCAs holds the CAs whose client certificates a TLS listener
// accepts, read from one PEM bundle and watched as a Reloader watches its
// pair: new handshakes verify against the bundle as it is now (Config),
// Check and Reload load it again, and a file that does not load leaves
// the previous CAs in force. Operators rotate device CAs by adding the new
// one, reissuing the devices, then removing the old one, without a restart.
type ClientCAs struct {
	path string
	w    watch[caSet]
}

// caSet is the CAs of one load.
type caSet struct {
	certs []*x509.Certificate
	pool  *x509.CertPool
	// keys holds each CA's subject and public key: a chain verified
	// against an earlier bundle is still trusted while its root's name and
	// key are in this one (a CA certificate renewed with the same key
	// included).
	keys map[string]bool

	confOnce sync.Once
	conf     *tls.Config
}

func caKey(c *x509.Certificate) string {
	return string(c.RawSubject) + "\x00" + string(c.RawSubjectPublicKeyInfo)
}

// NewClientCAs loads the bundle at path; an error here is a start-up
// error.
func NewClientCAs(path string, log *slog.Logger) (*ClientCAs, error) {
	c := &ClientCAs{path: path}
	c.w = watch[caSet]{what: "client CAs", paths: []string{path}, log: log, load: c.load, loaded: c.loaded}
	if err := c.w.start(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *ClientCAs) load() (*caSet, error) {
	raw, err := os.ReadFile(c.path)
	if err != nil {
		return nil, fmt.Errorf("read client CAs: %w", err)
	}
	certs, err := pemCertificates(raw)
	if err != nil {
		return nil, fmt.Errorf("client CAs %s: %w", c.path, err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("client CAs %s: no PEM CERTIFICATE block found; give the CA certificates that sign the devices' certificates", c.path)
	}
	set := &caSet{certs: certs, pool: x509.NewCertPool(), keys: map[string]bool{}}
	for _, ca := range certs {
		set.pool.AddCert(ca)
		set.keys[caKey(ca)] = true
	}
	return set, nil
}

// pemCertificates parses the CERTIFICATE blocks of a PEM bundle.
func pemCertificates(raw []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
}

// loaded logs a new bundle with the CAs it added and removed: a removal
// ends the connections of that CA's certificates.
func (c *ClientCAs) loaded(old, cur *caSet) {
	if old == nil {
		return // the start, which chatd's listener line reports
	}
	c.w.log.Info("client CAs loaded", "file", c.path, "cas", len(cur.certs),
		"added", subjectsNotIn(cur, old), "removed", subjectsNotIn(old, cur))
}

// subjectsNotIn are the subjects of a's CAs whose name and key b lacks.
func subjectsNotIn(a, b *caSet) []string {
	out := []string{}
	for _, ca := range a.certs {
		if !b.keys[caKey(ca)] {
			out = append(out, ca.Subject.String())
		}
	}
	return out
}

// Config returns base with the client CAs of each new handshake set to
// the bundle in force (checking the file at most once a CheckInterval).
// base's other settings (ClientAuth, MinVersion, GetCertificate) are kept;
// base must not change afterwards. A resumed TLS session is verified
// again against the bundle in force by crypto/tls, so a removed CA's
// device cannot come back by a session ticket.
func (c *ClientCAs) Config(base *tls.Config) *tls.Config {
	out := base.Clone()
	out.ClientCAs = c.w.cur.Load().pool
	out.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		set := c.w.get()
		set.confOnce.Do(func() {
			set.conf = base.Clone()
			set.conf.ClientCAs = set.pool
		})
		return set.conf, nil
	}
	return out
}

// Certificates are the CAs in force.
func (c *ClientCAs) Certificates() []*x509.Certificate { return slices.Clone(c.w.cur.Load().certs) }

// Trusts reports whether one of chains, verified at a handshake, ends in
// a CA of the bundle in force (the same name and key): false once the CA
// that a connection's certificate chains to is removed.
func (c *ClientCAs) Trusts(chains [][]*x509.Certificate) bool {
	set := c.w.cur.Load()
	for _, ch := range chains {
		if len(ch) > 0 && set.keys[caKey(ch[len(ch)-1])] {
			return true
		}
	}
	return false
}

// Check loads the file again if it changed and the last look is
// CheckInterval old.
func (c *ClientCAs) Check() { c.w.get() }

// Reload loads the file now, changed or not (SIGHUP). On error the
// previous CAs stay in force.
func (c *ClientCAs) Reload() error { return c.w.check(true) }

// Reloads counts the loads after the first: a change is a new count.
func (c *ClientCAs) Reloads() int64 { return c.w.reloads.Load() }

// LastError is the error of the last load attempt, nil when it worked.
func (c *ClientCAs) LastError() error { return c.w.lastErr() }
