package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	chat "github.com/chatd/chatd"
)

// ErrCertIdentity: a verified client certificate whose subject Common Name
// is not a user id.
var ErrCertIdentity = errors.New("client certificate's subject CN is not a positive integer user id")

// CertUser maps a TLS client certificate to a chat user, as Mosquitto's
// use_identity_as_username does: a certificate that verified against the
// configured client CAs names the user in its subject Common Name, in
// canonical decimal (CN=42 is user 42). presented is false for a
// connection that is not TLS or sent no verified certificate; the caller
// authenticates it otherwise (the JWT). issuedAt is the certificate's
// NotBefore, which its user's revocation refuses it by as it refuses a
// token by its iat. until is when the certificate chain stops being valid
// (the earliest NotAfter in it): a connection it authenticated ends then.
// The TLS handshake must be complete, as it is once the CONNECT packet
// has been read.
func CertUser(conn net.Conn) (user int64, issuedAt, until time.Time, presented bool, err error) {
	return certUser(conn, CertChecks{})
}

// certRefusal is a verified client certificate refused as a revoked
// credential is (it wraps chat.ErrTokenRevoked). ClientReason is what the
// client of a connection it authenticated is told when that connection
// ends (the MQTT 5 reason string).
type certRefusal struct{ msg, reason string }

func (e *certRefusal) Error() string        { return e.msg }
func (e *certRefusal) Unwrap() error        { return chat.ErrTokenRevoked }
func (e *certRefusal) ClientReason() string { return e.reason }

var (
	// ErrCertRevoked: the client certificate is listed by its CA's
	// revocation list.
	ErrCertRevoked error = &certRefusal{msg: "client certificate revoked by its CA's CRL",
		reason: "the client certificate this connection was authenticated with was revoked by its CA"}
	// ErrCertCARemoved: the CA the client certificate chains to was
	// removed from the client CAs after its handshake.
	ErrCertCARemoved error = &certRefusal{msg: "client certificate's CA is no longer one of the client CAs",
		reason: "the CA of the client certificate this connection was authenticated with is no longer trusted: connect with a certificate of a current CA"}
)

// CertChecks are what a client certificate's handshake verified that may
// change while its connections last.
type CertChecks struct {
	// Trusts reports whether one of the verified chains still ends in
	// a client CA (tlsreload.ClientCAs.Trusts); nil: they all do.
	Trusts func(chains [][]*x509.Certificate) bool
	// Revoked reports whether the lists of issuer, the CA that signed
	// cert, name it (tlsreload.CRL.Revoked); nil: none does.
	Revoked func(cert, issuer *x509.Certificate) bool
}

// CertUserChecked is CertUser for certificates the checks may refuse
// since their handshake: such a certificate names its user, with an error
// wrapping ErrCertCARemoved, or ErrCertRevoked with its serial (in hex, as
// openssl prints it) and issuer.
func CertUserChecked(checks CertChecks) func(net.Conn) (int64, time.Time, time.Time, bool, error) {
	return func(conn net.Conn) (int64, time.Time, time.Time, bool, error) { return certUser(conn, checks) }
}

func certUser(conn net.Conn, checks CertChecks) (user int64, issuedAt, until time.Time, presented bool, err error) {
	// The listener's wrappers (the broker's CONNECT size limit) give the
	// connection they wrap by Unwrap.
	for {
		w, ok := conn.(interface{ Unwrap() net.Conn })
		if !ok {
			break
		}
		conn = w.Unwrap()
	}
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return 0, issuedAt, until, false, nil
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return 0, issuedAt, until, false, nil
	}
	chain := st.VerifiedChains[0]
	id, ok := ParseUserID(chain[0].Subject.CommonName)
	if !ok {
		return 0, issuedAt, until, true, ErrCertIdentity
	}
	until = chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	if checks.Trusts != nil && !checks.Trusts(st.VerifiedChains) {
		return id, chain[0].NotBefore, until, true, fmt.Errorf("%w: issuer %s", ErrCertCARemoved, chain[len(chain)-1].Subject)
	}
	if checks.Revoked != nil {
		// The issuer of each chain the handshake verified (a leaf that
		// is itself a client CA is its own issuer).
		for _, ch := range st.VerifiedChains {
			issuer := ch[0]
			if len(ch) > 1 {
				issuer = ch[1]
			}
			if checks.Revoked(ch[0], issuer) {
				return id, chain[0].NotBefore, until, true, fmt.Errorf("%w: serial %X, issuer %s", ErrCertRevoked, ch[0].SerialNumber, issuer.Subject)
			}
		}
	}
	return id, chain[0].NotBefore, until, true, nil
}
