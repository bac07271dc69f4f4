package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// JWKS defaults.
const (
	DefaultJWKSRefresh    = 15 * time.Minute
	DefaultJWKSMinRefetch = 30 * time.Second
	jwksHTTPTimeout       = 10 * time.Second
	maxJWKSBytes          = 1 << 20
)

// JWKSOptions configure NewJWKS.
type JWKSOptions struct {
	URL string
	// Refresh is how often the key set is fetched again (default 15m).
	Refresh time.Duration
	// MinRefetch bounds the extra fetches a token with an unknown kid
	// triggers: at most one per MinRefetch (default 30s), so a flood of
	// forged kids cannot turn into a flood of requests to the provider.
	MinRefetch time.Duration
	// Client fetches the key set (default: a client with a 10 s timeout).
	Client *http.Client
	Logger *slog.Logger
}

// JWKS is an identity provider's JSON Web Key Set fetched from a URL and
// cached: refreshed every Refresh, and fetched early (at most once per
// MinRefetch) when a token names a kid the cache does not hold, which is
// how a key rotation is picked up. A failed fetch keeps the cached keys
// (logged at warn). Safe for concurrent use; Close stops the refreshes.
type JWKS struct {
	url     string         // for logs: a password in it masked (Redacted)
	store   jwkset.Storage // fetches the set again for an unknown kid
	cache   jwkset.Storage // the keys fetched, never fetching
	refetch *rate.Limiter  // the unknown-kid refetches: Allow, never Wait
	every   time.Duration  // MinRefetch
	refresh time.Duration  // Refresh
	started time.Time      // when the periodic refreshes' ticker started
	log     *slog.Logger
	cancel  context.CancelFunc
	failing atomic.Bool
	// fetches counts the fetches made for tokens (refetchNow, key), each
	// once it is done.
	fetches atomic.Int64
	// redirectedTo is the last other host the URL redirected to (logged
	// when it changes, not at every fetch).
	redirectedTo atomic.Value
}

// NewJWKS fetches the key set once (a failure is logged, not returned: the
// refreshes keep trying) and starts refreshing it in the background.
func NewJWKS(opts JWKSOptions) (*JWKS, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultJWKSRefresh
	}
	if opts.MinRefetch <= 0 {
		opts.MinRefetch = DefaultJWKSMinRefetch
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: jwksHTTPTimeout}
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &JWKS{url: Redacted(opts.URL), log: opts.Logger, cancel: cancel, refetch: rate.NewLimiter(rate.Every(opts.MinRefetch), 1), every: opts.MinRefetch,
		refresh: opts.Refresh, started: time.Now()}
	watched := *client
	base := watched.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	watched.Transport = &jwksTransport{base: base, j: j}
	watched.CheckRedirect = j.checkRedirect(client.CheckRedirect)
	var cache jwkset.Storage
	remote, err := jwkset.NewStorageFromHTTP(opts.URL, jwkset.HTTPClientStorageOptions{
		Client:                    &watched,
		Ctx:                       ctx,
		HTTPTimeout:               jwksHTTPTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshInterval:           opts.Refresh,
		RefreshErrorHandler: func(_ context.Context, err error) {
			j.failing.Store(true)
			n := 0
			if cache != nil {
				if all, err := cache.KeyReadAll(context.Background()); err == nil {
					n = len(all)
				}
			}
			j.log.Warn("JWKS fetch failed; the cached signing keys stay in use until it answers again",
				"url", j.url, "cached_keys", n, "err", err)
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("set up JWKS %s: %w", opts.URL, err)
	}
	cache = remote
	j.cache = remote
	store, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs: map[string]jwkset.Storage{opts.URL: remote},
		// Unlimited here: key lets a lookup through to this client only
		// when j.refetch allows a refetch now. The library's own limiter
		// would make a token wait for its turn (up to RateLimitWaitMax).
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("set up JWKS %s: %w", opts.URL, err)
	}
	j.store = store
	return j, nil
}

// Close stops the background refreshes.
func (j *JWKS) Close() { j.cancel() }

// URL is where the key set is fetched from, a password in it masked.
func (j *JWKS) URL() string { return j.url }

// Redacted is a URL as logs may show it: a password in it masked
// (https://user:xxxxx@idp/certs, as providers behind basic
// authentication are configured); s as given when it does not parse.
func Redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}

// Len is the number of keys cached.
func (j *JWKS) Len() int {
	all, err := j.store.KeyReadAll(context.Background())
	if err != nil {
		return 0
	}
	return len(all)
}

// key returns the public key kid names, checked to be a signing key of
// alg's type (an "alg" the key set gives must be alg itself): of the keys
// under kid, those alg can use (RFC 7517 §4.5 lets keys of different
// types share a kid; a jwt.VerificationKeySet when more than one can). A
// kid the cache does not hold fetches the set again when the refetch
// limit allows one now: it is ErrUnknownKey when the set fetched does not
// hold it either, ErrKeysUnavailable when the fetch failed or the limit
// allows none now (a key rotated in since the last fetch would be refused
// for good otherwise).
func (j *JWKS) key(kid, alg string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), jwksHTTPTimeout)
	defer cancel()
	named, err := keysNamed(ctx, j.cache, kid)
	if err != nil {
		return nil, ErrKeysUnavailable
	}
	if len(named) == 0 {
		if !j.refetch.Allow() {
			return nil, ErrKeysUnavailable
		}
		_, err = j.store.KeyRead(ctx, kid)
		j.fetches.Add(1)
		if err == nil {
			named, err = keysNamed(ctx, j.cache, kid)
		}
		if err != nil || len(named) == 0 {
			if j.unavailable() {
				return nil, ErrKeysUnavailable
			}
			return nil, ErrUnknownKey
		}
	}
	var keys []jwt.VerificationKey
	for _, k := range named {
		if pub, ok := usable(k, alg); ok {
			keys = append(keys, pub)
		}
	}
	switch len(keys) {
	case 0:
		return nil, ErrAlgorithm
	case 1:
		return keys[0], nil
	}
	return jwt.VerificationKeySet{Keys: keys}, nil
}

// keysNamed returns the keys of s whose kid is kid.
func keysNamed(ctx context.Context, s jwkset.Storage, kid string) ([]jwkset.JWK, error) {
	all, err := s.KeyReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cached keys: %w", err)
	}
	return slices.DeleteFunc(all, func(k jwkset.JWK) bool { return k.Marshal().KID != kid }), nil
}

// refetchKid is a kid no key set holds: reading it makes the client fetch
// the set again (jwkset fetches for a kid it does not hold, and has no
// other way to ask for a fetch).
const refetchKid = "\x00chatd: fetch the key set again"

// refetchNow fetches the key set again when the refetch limit allows one
// now, for a token without a kid that no cached key can verify (the set
// was never fetched: the provider was down at start; or the provider
// rotated). It reports whether it fetched (successfully or not).
func (j *JWKS) refetchNow() bool {
	if !j.refetch.Allow() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), jwksHTTPTimeout)
	defer cancel()
	_, _ = j.store.KeyRead(ctx, refetchKid)
	j.fetches.Add(1)
	return true
}

// fetched is the number of fetches made for tokens so far: a caller that
// reads it before looking at the keys and again after knows whether the
// set was fetched meanwhile.
func (j *JWKS) fetched() int64 { return j.fetches.Load() }

// refetchIn is how long until the key set is fetched again or may be
// (0: now): the refetch limit allows a fetch, or the next periodic
// refresh comes, whichever is first.
func (j *JWKS) refetchIn() time.Duration {
	var wait time.Duration
	if n := j.refetch.Tokens(); n < 1 {
		wait = time.Duration((1 - n) * float64(j.every))
	}
	since := time.Since(j.started)
	return min(wait, j.refresh-since%j.refresh)
}

// unavailable reports whether the key set's last fetch failed (the first
// one included), so that the keys cached may not be the provider's.
func (j *JWKS) unavailable() bool { return j.failing.Load() }

// keys returns every cached key usable for alg.
func (j *JWKS) keys(alg string) []jwt.VerificationKey {
	all, err := j.store.KeyReadAll(context.Background())
	if err != nil {
		return nil
	}
	var out []jwt.VerificationKey
	for _, k := range all {
		if pub, ok := usable(k, alg); ok {
			out = append(out, pub)
		}
	}
	return out
}

// usable returns k's public key if it may verify alg: use "sig" or unset,
// alg unset or equal, and the key type alg needs (RSA of at least
// MinRSABits for RS256, P-256 for ES256, Ed25519 for EdDSA). Symmetric
// ("oct") keys are never usable: a published key set is public.
func usable(k jwkset.JWK, alg string) (any, bool) {
	m := k.Marshal()
	if m.USE != "" && m.USE != jwkset.UseSig {
		return nil, false
	}
	if a := m.ALG.String(); a != "" && a != alg {
		return nil, false
	}
	key := k.Key()
	switch pk := key.(type) {
	case *rsa.PrivateKey:
		key = &pk.PublicKey
	case *ecdsa.PrivateKey:
		key = &pk.PublicKey
	case ed25519.PrivateKey:
		key = pk.Public()
	}
	switch pub := key.(type) {
	case *rsa.PublicKey:
		return pub, alg == AlgRS256 && pub.N.BitLen() >= MinRSABits
	case *ecdsa.PublicKey:
		return pub, alg == AlgES256 && pub.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return pub, alg == AlgEdDSA
	}
	return nil, false
}

// maxJWKSRedirects is net/http's own limit, which a CheckRedirect of
// our own replaces.
const maxJWKSRedirects = 10

// checkRedirect refuses a redirect from https to anything else: keys
// fetched over plain http can be replaced by anyone on the path, who then
// signs the tokens chatd accepts, however the URL was configured. A
// redirect to another https host (a CDN) is followed: TLS authenticates
// that host and the configured one chose it; it is logged at info when
// the host redirected to changes, so that operators see where the keys
// come from. next is the caller's own CheckRedirect, if any.
func (j *JWKS) checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		from := via[len(via)-1].URL
		if from.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("refused a JWKS redirect from https to %s (%s to %s): a key set fetched over plain http can be replaced by anyone on the path",
				req.URL.Scheme, Redacted(from.String()), Redacted(req.URL.String()))
		}
		if next != nil {
			if err := next(req, via); err != nil {
				return err
			}
		} else if len(via) >= maxJWKSRedirects {
			return fmt.Errorf("stopped the JWKS fetch after %d redirects", maxJWKSRedirects)
		}
		if to := Redacted(req.URL.String()); req.URL.Host != via[0].URL.Host && j.redirectedTo.Swap(to) != to {
			j.log.Info("JWKS URL redirects to another host; the keys are fetched from there", "url", j.url, "to", to)
		}
		return nil
	}
}

// jwksTransport bounds the key set's size and logs when a failing
// provider answers again.
type jwksTransport struct {
	base http.RoundTripper
	j    *JWKS
}

func (t *jwksTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK && t.j.failing.Swap(false) {
		t.j.log.Info("JWKS answers again", "url", t.j.url)
	}
	resp.Body = limitedBody{io.LimitReader(resp.Body, maxJWKSBytes), resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}
