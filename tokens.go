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
	revoked := TokenRevoked(before, issuedAt)
	s.revoked.record(userID, before, issuedAt, revoked, time.Now())
	if revoked {
		return ErrTokenRevoked
	}
	return nil
}

// knownRevocationRecheck is how long a revocation CheckToken found
// refuses the user's tokens from memory (TokenKnownRevoked) before it is
// read again: an operator may lift a revocation (DELETE FROM
// token_revocation, docs/operations.md), which every node must see
// within a second, and a read a second per user stays cheap however often
// a revoked token is presented.
const knownRevocationRecheck = time.Second

// TokenKnownRevoked is CheckToken from what this Service has seen:
// ErrTokenRevoked when a token of userID issued at issuedAt is refused by
// a revocation CheckToken found, read again from the database at most once
// per knownRevocationRecheck (a lifted revocation stops refusing then).
// Transports call it before they charge the caller's rate limits (which
// they do before CheckToken, to spare the database a read per request over
// the limit): a stolen token its user revoked, presented again and again,
// must be refused as revoked, not spend the user's budget until the user
// signed in again is refused with 429. While the database cannot be read,
// a revocation it found stays in force.
func (s *Service) TokenKnownRevoked(ctx context.Context, userID int64, issuedAt time.Time) error {
	refused, recheck := s.revoked.refuses(userID, issuedAt, time.Now())
	if !refused {
		return nil
	}
	if recheck {
		t, ok := s.Store.(TokenStore)
		if !ok {
			return ErrTokenRevoked
		}
		before, err := t.TokensRevokedBefore(ctx, userID)
		if err != nil {
			return ErrTokenRevoked
		}
		refused = TokenRevoked(before, issuedAt)
		s.revoked.record(userID, before, issuedAt, refused, time.Now())
	}
	if refused {
		return ErrTokenRevoked
	}
	return nil
}

// revokedTokens remembers, per user, the revocation instant CheckToken
// (or a recheck) last read for a user whose token it refused, and when it
// was read. At most maxKnownRevocations users are remembered; past that
// all are forgotten (each is found again by its next CheckToken).
type revokedTokens struct {
	mu     sync.Mutex
	before map[int64]knownRevocation
}

type knownRevocation struct {
	before time.Time // the user's revocation instant, as read
	read   time.Time // when it was read (or its recheck claimed)
}

const maxKnownRevocations = 100000

// record keeps what CheckToken read at now for userID: before, which
// refused a token issued at issuedAt or not. A user is remembered once a
// token of theirs was refused, and forgotten once the revocation is
// lifted (before zero); otherwise the instant read replaces the one
// remembered, whichever way it moved.
func (r *revokedTokens) record(userID int64, before, issuedAt time.Time, refused bool, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, known := r.before[userID]; !refused && !known {
		return
	}
	if before.IsZero() {
		delete(r.before, userID)
		return
	}
	if r.before == nil || len(r.before) >= maxKnownRevocations {
		r.before = map[int64]knownRevocation{}
	}
	r.before[userID] = knownRevocation{before: before, read: now}
}

// refuses reports whether the revocation remembered for userID refuses a
// token issued at issuedAt, and whether it is due to be read again: the
// first caller to find it older than knownRevocationRecheck rereads it,
// and the others meanwhile go by what is remembered.
func (r *revokedTokens) refuses(userID int64, issuedAt, now time.Time) (refused, recheck bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.before[userID]
	if !ok || !TokenRevoked(k.before, issuedAt) {
		return false, false
	}
	if now.Sub(k.read) < knownRevocationRecheck {
		return true, false
	}
	k.read = now
	r.before[userID] = k
	return true, true
}
