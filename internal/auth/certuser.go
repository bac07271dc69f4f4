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
	return certUser(conn, nil)
}

// ErrCertRevoked: the client certificate is listed by its CA's revocation
// list. It is a chat.ErrTokenRevoked: the certificate is refused as a
// credential its user revoked is.
var ErrCertRevoked = fmt.Errorf("client certificate revoked by its CA's CRL: %w", chat.ErrTokenRevoked)

// CertUserRevocable is CertUser for certificates that revoked(cert,
// issuer) may revoke (tlsreload.CRL.Revoked): such a certificate names its
// user, with an error wrapping ErrCertRevoked that gives its serial (in hex,
// as openssl prints it) and issuer.
func CertUserRevocable(revoked func(cert, issuer *x509.Certificate) bool) func(net.Conn) (int64, time.Time, time.Time, bool, error) {
	return func(conn net.Conn) (int64, time.Time, time.Time, bool, error) { return certUser(conn, revoked) }
}

func certUser(conn net.Conn, revoked func(cert, issuer *x509.Certificate) bool) (user int64, issuedAt, until time.Time, presented bool, err error) {
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
	if revoked != nil {
		// The issuer of each chain the handshake verified (a leaf that
		// is itself a client CA is its own issuer).
		for _, ch := range st.VerifiedChains {
			issuer := ch[0]
			if len(ch) > 1 {
				issuer = ch[1]
			}
			if revoked(ch[0], issuer) {
				return id, chain[0].NotBefore, until, true, fmt.Errorf("%w: serial %X, issuer %s", ErrCertRevoked, ch[0].SerialNumber, issuer.Subject)
			}
		}
	}
	return id, chain[0].NotBefore, until, true, nil
}
