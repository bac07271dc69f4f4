package auth

import (
	"bytes"
	"crypto"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/golang-jwt/jwt/v5"
)

// Options configure a Verifier for chatd's own HS256 tokens and for an
// identity provider's tokens (RS256, ES256, EdDSA).
type Options struct {
	// HSSecret verifies HS256 tokens, chatd's own (chatctl token, the dev
	// sign-in); empty turns HS256 off.
	HSSecret []byte
	// PublicKey is the identity provider's key: *rsa.PublicKey (RS256),
	// ed25519.PublicKey (EdDSA) or *ecdsa.PublicKey on P-256 (ES256).
	PublicKey crypto.PublicKey
	// JWKS is the identity provider's key set (nil: none). With it, RS256,
	// ES256 and EdDSA are accepted, each with the keys of its type.
	JWKS *JWKS
	// Issuer, when set, must equal the iss claim of provider tokens.
	Issuer string
	// Audience, when set, must contain one of the aud values of provider
	// tokens.
	Audience []string
	// UserClaim names the claim of provider tokens holding the chat user
	// id; "" means "sub". Its value must be a positive integer in
	// canonical decimal, as a JSON string ("42") or, in a claim other
	// than sub (a string by RFC 7519), a number (42).
	UserClaim string
}

// New returns a Verifier for opts. HS256 tokens keep the contract of
// NewVerifier (sub is the user id; iss, aud and UserClaim do not apply:
// they are chatd's own); every other accepted token is a provider token.
func New(opts Options) *Verifier {
	v := NewVerifier(opts.HSSecret, opts.PublicKey)
	v.jwks = opts.JWKS
	v.issuer = opts.Issuer
	v.audience = slices.Clone(opts.Audience)
	v.userClaim = opts.UserClaim
	if v.userClaim == "sub" {
		v.userClaim = ""
	}
	if v.jwks != nil {
		for _, alg := range []string{AlgRS256, AlgES256, AlgEdDSA} {
			if !slices.Contains(v.methods, alg) {
				v.methods = append(v.methods, alg)
			}
		}
	}
	return v
}

// claimSet is the registered claims plus the configured user claim.
type claimSet struct {
	jwt.RegisteredClaims
	userClaim string          // "" = sub
	user      json.RawMessage // value of userClaim
}

// UnmarshalJSON reads each claim by its exact name: claim names are
// case-sensitive (RFC 7519 §4), and decoding into RegisteredClaims's
// struct would take "EXP" or "Sub" for exp or sub (Go matches field names
// regardless of case), letting a claim of another name, later in the
// token, replace its expiry, subject, issuer or audience.
func (c *claimSet) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	r := &c.RegisteredClaims
	for name, dst := range map[string]any{"iss": &r.Issuer, "sub": &r.Subject, "aud": &r.Audience,
		"exp": &r.ExpiresAt, "nbf": &r.NotBefore, "iat": &r.IssuedAt, "jti": &r.ID} {
		if raw, ok := all[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("read claim %s: %w", name, err)
			}
		}
	}
	if c.userClaim != "" {
		c.user = all[c.userClaim]
	}
	return nil
}

// providerClaims checks iss and aud of a provider token and returns its
// user id.
func (v *Verifier) providerClaims(c *claimSet) (int64, error) {
	if v.issuer != "" && c.Issuer != v.issuer {
		return 0, invalid(ErrIssuer)
	}
	if len(v.audience) > 0 && !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(v.audience, a) }) {
		return 0, invalid(ErrAudience)
	}
	if v.userClaim == "" {
		id, ok := ParseUserID(c.Subject)
		if !ok {
			return 0, invalid(ErrSubject)
		}
		return id, nil
	}
	raw := bytes.TrimSpace(c.user)
	var s string
	if len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return 0, invalid(ErrSubject)
		}
	} else {
		s = string(raw) // a JSON number: its text must be canonical too (no 4.2e1)
	}
	id, ok := ParseUserID(s)
	if !ok {
		return 0, invalid(ErrSubject)
	}
	return id, nil
}
