package server_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signedToken is an HS256 token for user signed with secret, issued at
// iat (zero: no iat claim) and expiring at exp: unlike auth.Mint's, any
// such claims, an expired token's too, for the tests of what chatd
// accepts.
func signedToken(t *testing.T, secret string, user int64, iat, exp time.Time) string {
	t.Helper()
	c := jwt.RegisteredClaims{Subject: strconv.FormatInt(user, 10), ExpiresAt: jwt.NewNumericDate(exp)}
	if !iat.IsZero() {
		c.IssuedAt = jwt.NewNumericDate(iat)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
