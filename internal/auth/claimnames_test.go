package auth

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signPayload signs payload, a claims object written out (keys as given,
// repeated or in any case), with m and key.
func signPayload(t *testing.T, m jwt.SigningMethod, key any, payload string) string {
	t.Helper()
	s := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"`+m.Alg()+`","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(payload))
	sig, err := m.Sign(s, key)
	if err != nil {
		t.Fatal(err)
	}
	return s + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Claim names are case-sensitive (RFC 7519 §4): "EXP", "Sub", "ISS" are
// claims of their own, not exp, sub and iss. Go's JSON decoding matches
// struct fields regardless of case, so a later "EXP" used to replace a
// token's exp (an expired token accepted for as long as "EXP" said) and a
// "Sub" to name its user.
func TestRegisteredClaimsAreReadByTheirExactNames(t *testing.T) {
	now := time.Now().Unix()
	v := NewVerifier(testSecret, nil)
	hs := func(format string, args ...any) string {
		return signPayload(t, jwt.SigningMethodHS256, testSecret, fmt.Sprintf(format, args...))
	}
	rejects(t, v, hs(`{"sub":"7","iat":%d,"exp":%d,"EXP":%d}`, now-600, now-300, now+3600), ErrExpired)
	rejects(t, v, hs(`{"sub":"7","iat":%d,"Exp":%d}`, now, now+3600), ErrMissingExp)
	rejects(t, v, hs(`{"Sub":"7","iat":%d,"exp":%d}`, now, now+3600), ErrSubject)
	accepts(t, v, hs(`{"sub":"7","SUB":"8","iat":%d,"exp":%d}`, now, now+3600), 7)
	// A revocation goes by iat: an "IAT" must not make an old token new.
	if _, issued, _, err := v.VerifyIssued(hs(`{"sub":"7","iat":%d,"IAT":%d,"exp":%d}`, now-600, now, now+3600)); err != nil || issued.Unix() != now-600 {
		t.Fatalf("issued at %v (%v), want its iat %v", issued, err, time.Unix(now-600, 0))
	}

	// A provider's token: iss and aud are its own, whatever "ISS" and
	// "Aud" say.
	p := New(Options{PublicKey: rsaPublic(t), Issuer: "https://idp.example", Audience: []string{"chatd"}})
	rs := func(format string, args ...any) string {
		return signPayload(t, jwt.SigningMethodRS256, rsaPrivate(t), fmt.Sprintf(format, args...))
	}
	rejects(t, p, rs(`{"sub":"7","iss":"https://other.example","ISS":"https://idp.example","aud":"chatd","exp":%d}`, now+3600), ErrIssuer)
	rejects(t, p, rs(`{"sub":"7","iss":"https://idp.example","aud":"other","Aud":"chatd","exp":%d}`, now+3600), ErrAudience)
	accepts(t, p, rs(`{"sub":"7","iss":"https://idp.example","aud":"chatd","exp":%d}`, now+3600), 7)
	// sub is a string (RFC 7519), as docs/operations.md says: a number
	// there is malformed; a claim of its own may hold one.
	rejects(t, p, rs(`{"sub":7,"iss":"https://idp.example","aud":"chatd","exp":%d}`, now+3600), ErrMalformed)
}
