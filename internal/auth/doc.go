// Package auth verifies and mints the JWTs chat clients present (as the MQTT
// password, or an HTTP bearer token) and manages the keys behind them.
//
// Contract of Verifier.Verify:
//   - HS256 is accepted with the shared secret (never when it is empty);
//     RS256 only when an RSA public key was configured, EdDSA only when an
//     Ed25519 one was, ES256 only when a P-256 one was; with a JWKS (New,
//     Options.JWKS) all three, each with the key the token's kid names that
//     fits its alg (keys of different types may share a kid, RFC 7517
//     §4.5), every key of the type when it names none. Every other alg, "none" included,
//     is rejected, and an HS256 token whose "secret" is the public key is
//     rejected (the HS key is only ever the configured secret; JWKS keys are
//     never used for HS256).
//   - HS256 tokens are chatd's own: sub is the user id, iss and aud are not
//     looked at. Provider tokens (every other alg) must carry the configured
//     iss and one of the configured aud values, and the configured user claim
//     (default sub) holds the user id: sub as a JSON string (RFC 7519; a
//     number there is ErrMalformed), a claim of its own as a string or a
//     number; a non-numeric one is refused (ErrSubject), never mapped.
//   - exp is required and checked with Leeway (30s); nbf and iat in the future
//     (beyond Leeway) are rejected.
//     VerifyUntil also returns exp plus Leeway, the instant from which the
//     token is refused: a connection it authenticated ends then.
//   - Claims are read by their exact names (RFC 7519): "EXP" or "Sub" is
//     a claim of its own, never exp or sub.
//   - sub must be a positive int64 in canonical decimal ("7"; not "07",
//     "+7", " 7", "1e3", "0", "-1" or anything above 9223372036854775807).
//   - Tokens longer than MaxTokenBytes are rejected before parsing; base64
//     must be canonical (strict decoding).
//   - Every failure is an *InvalidTokenError: errors.Is(err, ErrInvalidToken)
//     holds, as does errors.Is(err, <reason sentinel>) such as ErrExpired.
//     Error text never contains the token.
//
// A Verifier is immutable and safe for concurrent use.
//
// A JWKS fetches an identity provider's key set and caches it: refreshed
// every JWKSOptions.Refresh by a goroutine of its own that Close stops, and
// fetched early (at most once per MinRefetch, never waiting for that
// limit) for a kid it does not hold, and for a token without a kid that
// no key it holds of the token's type verifies. A failed fetch keeps the cached keys
// and is logged at warn. A redirect from https to plain http is refused
// (the fetch fails); one to another https host is followed and logged at
// info when that host changes. Safe for concurrent use.
//
// CertUser maps a verified TLS client certificate to a user: its subject
// CN, in the same canonical decimal as sub; and says when it was issued
// (NotBefore, which revocation goes by as it goes by a token's iat) and
// until when the chain is valid, as VerifyUntil does for a token.
//
// LoadOrCreateSecret keeps chatd's generated HS256 secret in
// <data dir>/jwt.secret (hex, mode 0600, created atomically, stable across
// restarts); LoadPublicKey reads an identity provider's PEM public key.
package auth
