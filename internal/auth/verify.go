package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	chat "github.com/chatd/chatd"
)

// MaxTokenBytes is the longest token Verify looks at.
const MaxTokenBytes = 4096

// Leeway is the clock skew tolerated on exp, nbf and iat.
const Leeway = 30 * time.Second

// Algorithms.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgEdDSA = "EdDSA"
	AlgES256 = "ES256"
)

// ErrInvalidToken matches every rejection of Verify.
var ErrInvalidToken = errors.New("invalid token")

// Reasons a token is rejected; an *InvalidTokenError wraps exactly one.
var (
	ErrTooLarge     = errors.New("token is larger than 4096 bytes")
	ErrMalformed    = errors.New("token is malformed")
	ErrAlgorithm    = errors.New("signing algorithm not accepted")
	ErrSignature    = errors.New("signature is invalid")
	ErrMissingExp   = errors.New("exp claim is missing")
	ErrExpired      = errors.New("token has expired")
	ErrNotYetValid  = errors.New("token is not valid yet (nbf or iat in the future)")
	ErrSubject      = errors.New("sub claim is not a positive integer user id")
	ErrInvalidClaim = errors.New("claims are invalid")
	ErrUnknownKey   = errors.New("signing key (kid) is not in the identity provider's key set")
	ErrIssuer       = errors.New("iss claim is not the configured issuer")
	ErrAudience     = errors.New("aud claim does not name the configured audience")
)

// ErrKeysUnavailable: the token names a signing key the identity
// provider's key set could not be checked for now (the set was never
// fetched or its provider is failing, or it was fetched again less than
// MinRefetch ago, so a key rotated in since cannot be told from a forged
// one yet). It is no verdict on the token: the error returned with it is
// a *chat.Error with code unavailable, which transports answer "retry
// later" (HTTP 503, MQTT CONNACK 0x88), so that a client with a token it
// cannot renew does not give it up for good during a provider's outage.
var ErrKeysUnavailable = errors.New("the identity provider's signing keys cannot be checked now")

// keysUnavailable is the error Verify returns for ErrKeysUnavailable.
// It says when the key set may be fetched again (at least a second from
// now), in its RateLimit: before then the answer cannot change.
func (v *Verifier) keysUnavailable() error {
	retry := time.Second
	if v.jwks != nil {
		retry = max(retry, v.jwks.refetchIn())
	}
	return &chat.Error{Code: chat.CodeUnavailable, Message: ErrKeysUnavailable.Error() + ", retry later", Err: ErrKeysUnavailable,
		RateLimit: &chat.RateLimitInfo{Kind: "jwks_fetch", RetryAfter: retry}}
}

// InvalidTokenError is the error of Verify. Reason is one of the reason
// sentinels above; the token itself is never part of the error.
type InvalidTokenError struct {
	Reason error
}

func (e *InvalidTokenError) Error() string { return "invalid token: " + e.Reason.Error() }

// Unwrap lets errors.Is match both ErrInvalidToken and the reason.
func (e *InvalidTokenError) Unwrap() []error { return []error{ErrInvalidToken, e.Reason} }

func invalid(reason error) error { return &InvalidTokenError{Reason: reason} }

// Verifier checks chat JWTs. Build it with NewVerifier.
type Verifier struct {
	hs      []byte
	rsaKey  *rsa.PublicKey
	edKey   ed25519.PublicKey
	ecKey   *ecdsa.PublicKey
	methods []string
	now     func() time.Time // tests only

	// Identity provider tokens (every alg but HS256); see Options.
	jwks      *JWKS
	issuer    string
	audience  []string
	userClaim string
}

// NewVerifier accepts HS256 with hsSecret (if non-empty) and, depending on
// publicKey's type, RS256 (*rsa.PublicKey), EdDSA (ed25519.PublicKey) or
// ES256 (*ecdsa.PublicKey on P-256). A nil publicKey, or one of another
// type, enables none of them.
func NewVerifier(hsSecret []byte, publicKey crypto.PublicKey) *Verifier {
	v := &Verifier{now: time.Now}
	if len(hsSecret) > 0 {
		v.hs = append([]byte(nil), hsSecret...)
		v.methods = append(v.methods, AlgHS256)
	}
	switch k := publicKey.(type) {
	case *rsa.PublicKey:
		if k != nil && k.N != nil {
			v.rsaKey = k
			v.methods = append(v.methods, AlgRS256)
		}
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			v.edKey = append(ed25519.PublicKey(nil), k...)
			v.methods = append(v.methods, AlgEdDSA)
		}
	case *ed25519.PublicKey:
		if k != nil && len(*k) == ed25519.PublicKeySize {
			v.edKey = append(ed25519.PublicKey(nil), *k...)
			v.methods = append(v.methods, AlgEdDSA)
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			v.ecKey = k
			v.methods = append(v.methods, AlgES256)
		}
	}
	return v
}

// Algorithms lists the algorithms this Verifier accepts.
func (v *Verifier) Algorithms() []string { return append([]string(nil), v.methods...) }

// keyFor returns the key for the token's algorithm. WithValidMethods has
// already limited the algorithm to the configured ones; the type switch on
// the method makes the key/algorithm pairing explicit regardless. A token
// naming a key (kid) is checked with that key of the JWKS when one is
// configured; without a kid, every JWKS key of the algorithm's type is
// tried, after the configured public key.
func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	var static jwt.VerificationKey
	switch t.Method {
	case jwt.SigningMethodHS256:
		if len(v.hs) > 0 {
			return v.hs, nil
		}
		return nil, ErrAlgorithm
	case jwt.SigningMethodRS256:
		if v.rsaKey != nil {
			static = v.rsaKey
		}
	case jwt.SigningMethodEdDSA:
		if v.edKey != nil {
			static = v.edKey
		}
	case jwt.SigningMethodES256:
		if v.ecKey != nil {
			static = v.ecKey
		}
	default:
		return nil, ErrAlgorithm
	}
	if v.jwks == nil {
		if static == nil {
			return nil, ErrAlgorithm
		}
		return static, nil
	}
	alg := t.Method.Alg()
	if kid, ok := t.Header["kid"].(string); ok {
		return v.jwks.key(kid, alg)
	} else if _, present := t.Header["kid"]; present {
		return nil, ErrMalformed
	}
	set := jwt.VerificationKeySet{}
	if static != nil {
		set.Keys = append(set.Keys, static)
	}
	set.Keys = append(set.Keys, v.jwks.keys(alg)...)
	if len(set.Keys) == 0 && v.jwks.refetchNow() {
		// No key to try: the provider may publish one since (it was
		// down when the set was last fetched), as for an unknown kid.
		set.Keys = append(set.Keys, v.jwks.keys(alg)...)
	}
	if len(set.Keys) == 0 {
		if v.jwks.unavailable() {
			return nil, ErrKeysUnavailable
		}
		return nil, ErrUnknownKey
	}
	return set, nil
}

// Verify checks token and returns the user id in its sub claim.
func (v *Verifier) Verify(token string) (userID int64, err error) {
	userID, _, err = v.VerifyUntil(token)
	return userID, err
}

// VerifyUntil is Verify that also says until when the token is accepted:
// its exp plus Leeway, the instant from which Verify refuses it. A
// connection authenticated by the token must not outlive it.
func (v *Verifier) VerifyUntil(token string) (userID int64, until time.Time, err error) {
	userID, _, until, err = v.VerifyIssued(token)
	return userID, until, err
}

// VerifyIssued is VerifyUntil that also returns when the token was issued:
// its iat claim, zero when it has none. Revoking a user's tokens refuses
// those issued before an instant (chat.TokenRevoked).
func (v *Verifier) VerifyIssued(token string) (userID int64, issuedAt, until time.Time, err error) {
	userID, c, err := v.verify(token)
	if err != nil {
		return 0, time.Time{}, time.Time{}, err
	}
	if c.IssuedAt != nil {
		issuedAt = c.IssuedAt.Time
	}
	return userID, issuedAt, c.ExpiresAt.Add(Leeway), nil
}

// VerifyIssuedAt is Verify that also returns the token's iat (zero when
// it has none), for a caller that checks revocations (the HTTP API).
func (v *Verifier) VerifyIssuedAt(token string) (userID int64, issuedAt time.Time, err error) {
	userID, issuedAt, _, err = v.VerifyIssued(token)
	return userID, issuedAt, err
}

func (v *Verifier) verify(token string) (userID int64, c *claimSet, err error) {
	if len(token) > MaxTokenBytes {
		return 0, nil, invalid(ErrTooLarge)
	}
	if len(v.methods) == 0 {
		return 0, nil, invalid(ErrAlgorithm)
	}
	p := jwt.NewParser(
		jwt.WithValidMethods(v.methods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(v.now),
	)
	var fetched int64
	if v.jwks != nil {
		fetched = v.jwks.fetched()
	}
	claims := &claimSet{userClaim: v.userClaim}
	t, err := p.ParseWithClaims(token, claims, v.keyFor)
	if err != nil && t != nil && v.jwks != nil && t.Method != jwt.SigningMethodHS256 && !hasKid(t) &&
		reason(err) == ErrSignature {
		// No cached key verifies a provider token that names none: the
		// provider may have rotated, as an unknown kid would say. When the
		// set may not be fetched again yet, and was not fetched since this
		// token's keys were read, a key rotated in since cannot be told
		// from a forged signature: put off, as for an unknown kid.
		if !v.jwks.refetchNow() && v.jwks.fetched() == fetched {
			return 0, nil, v.keysUnavailable()
		}
		claims = &claimSet{userClaim: v.userClaim}
		t, err = p.ParseWithClaims(token, claims, v.keyFor)
	}
	if errors.Is(err, ErrKeysUnavailable) {
		return 0, nil, v.keysUnavailable()
	}
	if err != nil {
		return 0, nil, invalid(reason(err))
	}
	// exp is set: the parser refused a token without it.
	if t.Method == jwt.SigningMethodHS256 {
		// chatd's own tokens (chatctl, the dev sign-in): sub, no iss/aud.
		id, ok := ParseUserID(claims.Subject)
		if !ok {
			return 0, nil, invalid(ErrSubject)
		}
		return id, claims, nil
	}
	id, err := v.providerClaims(claims)
	if err != nil {
		return 0, nil, err
	}
	return id, claims, nil
}

// hasKid reports whether t's header names a signing key.
func hasKid(t *jwt.Token) bool {
	_, ok := t.Header["kid"]
	return ok
}

// reason maps a jwt error to one of our reason sentinels, dropping the
// library's text (which may quote parts of the input).
func reason(err error) error {
	switch {
	case errors.Is(err, ErrUnknownKey):
		return ErrUnknownKey
	case errors.Is(err, ErrMalformed):
		return ErrMalformed
	case errors.Is(err, ErrAlgorithm), errors.Is(err, jwt.ErrTokenUnverifiable):
		return ErrAlgorithm
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// WithValidMethods reports a disallowed alg as a signature error;
		// a signature that does not verify wraps the crypto error.
		if errors.Is(err, jwt.ErrSignatureInvalid) || errors.Is(err, rsa.ErrVerification) ||
			errors.Is(err, jwt.ErrEd25519Verification) || errors.Is(err, jwt.ErrECDSAVerification) ||
			errors.Is(err, jwt.ErrInvalidKey) {
			return ErrSignature
		}
		return ErrAlgorithm
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return ErrMissingExp
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ErrNotYetValid
	default:
		return ErrInvalidClaim
	}
}

// ParseUserID parses a user id in canonical decimal: 1 to 19 digits, no
// sign, no leading zero, no spaces, at most 9223372036854775807.
func ParseUserID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// Mint signs an HS256 token for userID valid for ttl (sub, iat, exp).
func Mint(secret []byte, userID int64, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("mint token: secret is empty")
	}
	if userID <= 0 {
		return "", fmt.Errorf("mint token: user id %d is not positive", userID)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("mint token: ttl %v is not positive", ttl)
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}
