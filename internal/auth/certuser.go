package auth

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
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
	return id, chain[0].NotBefore, until, true, nil
}
