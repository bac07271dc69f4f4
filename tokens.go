package chat

import (
	"context"
	"errors"
	"sync"
	"time"
)

// TokenStore keeps, per user, the instant before which their tokens are
// refused: "sign out everywhere" (POST /v1/me/tokens/revoke, RPC
// tokens.revoke) and an operator's chatctl revoke-tokens set it. A JWT is
// self-contained and stays valid until its exp, so revoking one is refusing
// it by when it was issued (its iat claim). The same instant refuses the
// user's device certificates (mTLS) issued before it, by their NotBefore:
// a stolen or decommissioned device is signed out with everything else,
// and one re-provisioned with a certificate issued since connects.
type TokenStore interface {
	// RevokeTokens refuses every token of userID issued before the
	// returned instant, which is the next whole second (iat has whole
	// seconds: a token issued in the second of the revocation, before or
	// after it, is refused too). It never moves the instant back. The
	// nodes holding connections authenticated by such tokens close them
	// (the store announces the revocation to every node), and the user's
	// push devices are forgotten (each registered by a session now signed
	// out: the apps register again when signed in).
	RevokeTokens(ctx context.Context, userID int64) (time.Time, error)
	// TokensRevokedBefore returns userID's instant (zero: never revoked).
	TokensRevokedBefore(ctx context.Context, userID int64) (time.Time, error)
}

// TokenRevoked reports whether a token (a client certificate) issued at
// issuedAt (its NotBefore) is refused by a revocation at before (zero:
// none). A token without an iat claim
// (issuedAt zero) is refused once its user revoked tokens: nothing says it
// is newer.
func TokenRevoked(before, issuedAt time.Time) bool {
	return !before.IsZero() && issuedAt.Before(before)
}

// tokenIssuedKey is the context key of WithTokenIssuedAt.
type tokenIssuedKey struct{}

// WithTokenIssuedAt returns ctx saying the caller was authenticated by a
// token issued at issuedAt (zero: no iat claim), or by a client
// certificate whose NotBefore is issuedAt. Transports set it on every call
// a credential authenticated (HTTP: the request's bearer token; MQTT RPC:
// the connection's token or certificate), because they check the
// credential when the call starts and a revocation may commit before the
// call writes: a write that must not outlive the revocation
// (RegisterDevice) checks the credential again where it writes.
func WithTokenIssuedAt(ctx context.Context, issuedAt time.Time) context.Context {
	return context.WithValue(ctx, tokenIssuedKey{}, issuedAt)
}

// TokenIssuedAt returns what WithTokenIssuedAt put in ctx (ok false:
// the caller was not authenticated by a revocable credential).
func TokenIssuedAt(ctx context.Context) (issuedAt time.Time, ok bool) {
	issuedAt, ok = ctx.Value(tokenIssuedKey{}).(time.Time)
	return issuedAt, ok
}

// ErrTokenRevoked: the token was issued before its user revoked their
// tokens. Transports answer it as they answer an invalid token (HTTP 401,
// MQTT bad credentials); it is not an *Error, whose codes all concern an
// authenticated caller.
var ErrTokenRevoked = errors.New("the token was revoked: sign in again")

// RPCRevokeTokens is the MQTT RPC method of RevokeTokens: its connection
// ends with the revocation, after its answer (hooks).
const RPCRevokeTokens = "tokens.revoke"

// TokensRevoked answers RPC tokens.revoke and POST /v1/me/tokens/revoke.
type TokensRevoked struct {
	RevokedBefore time.Time `json:"revokedBefore"`
}

func (s *Service) tokens() (TokenStore, error) {
	if t, ok := s.Store.(TokenStore); ok {
		return t, nil
	}
	return nil, Errorf(CodeNotFound, "token revocation is not available on this server")
}

// RevokeTokens signs userID out everywhere: every token and device
// certificate of theirs issued until now (the caller's too) is refused
// from now on, and connections authenticated by one end.
func (s *Service) RevokeTokens(ctx context.Context, userID int64) (TokensRevoked, error) {
	t, err := s.tokens()
	if err != nil {
		return TokensRevoked{}, err
	}
	before, err := t.RevokeTokens(ctx, userID)
	if err != nil {
		return TokensRevoked{}, err
	}
	return TokensRevoked{RevokedBefore: before.UTC()}, nil
}

// CheckToken returns ErrTokenRevoked when userID revoked their tokens
// after the one issued at issuedAt was.
func (s *Service) CheckToken(ctx context.Context, userID int64, issuedAt time.Time) error {
	t, ok := s.Store.(TokenStore)
	if !ok {
		return nil
	}
	before, err := t.TokensRevokedBefore(ctx, userID)
	if err != nil {
		return err
	}
	if TokenRevoked(before, issuedAt) {
		s.revoked.remember(userID, before)
		return ErrTokenRevoked
	}
	return nil
}

// TokenKnownRevoked is CheckToken from what this Service has seen only:
// ErrTokenRevoked when a token of userID issued at issuedAt is refused by
// a revocation CheckToken found, without reading the database. Transports
// call it before they charge the caller's rate limits (which they do
// before CheckToken, to spare the database a read per request over the
// limit): a stolen token its user revoked, presented again and again,
// must be refused as revoked, not spend the user's budget until the user
// signed in again is refused with 429.
func (s *Service) TokenKnownRevoked(userID int64, issuedAt time.Time) error {
	if s.revoked.refuses(userID, issuedAt) {
		return ErrTokenRevoked
	}
	return nil
}

// revokedTokens remembers, per user, the latest revocation instant
// CheckToken saw refuse a token. A revocation never moves back, so what
// it refuses stays refused: remembering it can only refuse rightly. At
// most maxKnownRevocations users are remembered; past that all are
// forgotten (each is found again by its next CheckToken).
type revokedTokens struct {
	mu     sync.Mutex
	before map[int64]time.Time
}

const maxKnownRevocations = 100000

func (r *revokedTokens) remember(userID int64, before time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.before == nil || len(r.before) >= maxKnownRevocations {
		r.before = map[int64]time.Time{}
	}
	if before.After(r.before[userID]) {
		r.before[userID] = before
	}
}

func (r *revokedTokens) refuses(userID int64, issuedAt time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return TokenRevoked(r.before[userID], issuedAt)
}
