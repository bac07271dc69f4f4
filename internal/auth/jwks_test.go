package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/testkit"
)

// idp is a loopback identity provider serving a JWKS whose keys the test
// swaps, counting the fetches; down makes it answer 503.
type idp struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]crypto.Signer // kid -> private key
	fetches atomic.Int64
	down    atomic.Bool
}

func newIDP(t *testing.T) *idp {
	p := &idp{t: t, keys: map[string]crypto.Signer{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) serve(w http.ResponseWriter, r *http.Request) {
	p.fetches.Add(1)
	if p.down.Load() {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for kid, k := range p.keys {
		set.Keys = append(set.Keys, publicJWK(p.t, kid, k))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// publicJWK is k's public key as a signing key of a key set, under kid.
func publicJWK(t *testing.T, kid string, k crypto.Signer) jwkset.JWKMarshal {
	md := jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}
	jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{Metadata: md})
	if err != nil {
		t.Errorf("jwk %s: %v", kid, err)
	}
	return jwk.Marshal()
}

// setKeys replaces the published keys.
func (p *idp) setKeys(keys map[string]crypto.Signer) {
	p.mu.Lock()
	p.keys = keys
	p.mu.Unlock()
}

func (p *idp) url() string { return p.srv.URL + "/.well-known/jwks.json" }

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signKid signs claims with key under kid ("" leaves kid out).
func signKid(t *testing.T, key crypto.Signer, kid string, c jwt.MapClaims) string {
	t.Helper()
	var m jwt.SigningMethod
	switch key.(type) {
	case *rsa.PrivateKey:
		m = jwt.SigningMethodRS256
	case *ecdsa.PrivateKey:
		m = jwt.SigningMethodES256
	case ed25519.PrivateKey:
		m = jwt.SigningMethodEdDSA
	}
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// providerClaims are the claims an identity provider would issue.
func idpClaims(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "iss": "https://idp.example/realms/chat", "aud": []string{"chatd", "other"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
}

func newJWKS(t *testing.T, p *idp, opts JWKSOptions, logs *logtest.Buffer) *JWKS {
	t.Helper()
	return jwksAt(t, p.url(), opts, logs)
}

// jwksAt is newJWKS for a key set served at url.
func jwksAt(t *testing.T, url string, opts JWKSOptions, logs *logtest.Buffer) *JWKS {
	t.Helper()
	opts.URL = url
	if logs == nil {
		logs = &logtest.Buffer{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	j, err := NewJWKS(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

func TestJWKSVerifiesRS256ES256AndEdDSAByKid(t *testing.T) {
	p := newIDP(t)
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"rsa-1": rsaPrivate(t), "ec-1": ec, "ed-1": ed})
	v := New(Options{HSSecret: testSecret, JWKS: newJWKS(t, p, JWKSOptions{}, nil)})
	accepts(t, v, signKid(t, rsaPrivate(t), "rsa-1", idpClaims("5")), 5)
	accepts(t, v, signKid(t, ec, "ec-1", idpClaims("6")), 6)
	accepts(t, v, signKid(t, ed, "ed-1", idpClaims("7")), 7)
	// Without a kid every key of the algorithm's type is tried.
	accepts(t, v, signKid(t, ec, "", idpClaims("8")), 8)
	// A key of the set used under another key's kid: the types differ.
	rejects(t, v, signKid(t, ec, "rsa-1", idpClaims("8")), ErrAlgorithm)
	// chatd's own HS256 tokens keep working beside the provider's.
	tok, _ := Mint(testSecret, 9, time.Hour)
	accepts(t, v, tok, 9)
	// A key the set does not hold, under a kid it does: bad signature.
	rejects(t, v, signKid(t, newECKey(t), "ec-1", idpClaims("8")), ErrSignature)
}

func TestJWKSRotationFetchesUnknownKidOnceAndDropsRetiredKeys(t *testing.T) {
	p := newIDP(t)
	oldKey, newKey := newECKey(t), newECKey(t)
	p.setKeys(map[string]crypto.Signer{"2025": oldKey})
	// Refresh far away: only an unknown kid can make it fetch again.
	j := newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: time.Hour}, nil)
	v := New(Options{JWKS: j})
	accepts(t, v, signKid(t, oldKey, "2025", idpClaims("1")), 1)
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after the first verification, want 1", n)
	}
	// The provider rotates: the new key is published and the old one
	// retired. The first token with the new kid fetches the set at once.
	p.setKeys(map[string]crypto.Signer{"2026": newKey})
	accepts(t, v, signKid(t, newKey, "2026", idpClaims("2")), 2)
	if n := p.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after the rotation, want 2", n)
	}
	// The retired key went with the refetch (refused once the set is
	// fetched for it, put off until MinRefetch allows that).
	refusedOrPutOff(t, v, signKid(t, oldKey, "2025", idpClaims("1")))
}

func TestJWKSUnknownKidFloodFetchesAtMostOncePerMinRefetch(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"a": key})
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: time.Hour}, nil)})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refusedOrPutOff(t, v, signKid(t, key, fmt.Sprintf("forged-%d", i), idpClaims("1")))
		}()
	}
	wg.Wait()
	if n := p.fetches.Load(); n > 2 {
		t.Fatalf("200 unknown kids made %d fetches, want at most 2 (the first and one refetch)", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("rejecting unknown kids took %v: they must not wait for the rate limit", d)
	}
	// The known key is unaffected.
	accepts(t, v, signKid(t, key, "a", idpClaims("3")), 3)
}

func TestJWKSRejectsWrongIssuerAudienceAndExpiredTokens(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"k": key})
	v := New(Options{HSSecret: testSecret, JWKS: newJWKS(t, p, JWKSOptions{}, nil),
		Issuer: "https://idp.example/realms/chat", Audience: []string{"chatd"}})
	accepts(t, v, signKid(t, key, "k", idpClaims("4")), 4)

	c := idpClaims("4")
	c["iss"] = "https://evil.example/realms/chat"
	rejects(t, v, signKid(t, key, "k", c), ErrIssuer)
	delete(c, "iss")
	rejects(t, v, signKid(t, key, "k", c), ErrIssuer)

	c = idpClaims("4")
	c["aud"] = "another-app"
	rejects(t, v, signKid(t, key, "k", c), ErrAudience)
	delete(c, "aud")
	rejects(t, v, signKid(t, key, "k", c), ErrAudience)
	c["aud"] = "chatd" // a single string is an audience too
	accepts(t, v, signKid(t, key, "k", c), 4)

	c = idpClaims("4")
	c["exp"] = time.Now().Add(-time.Hour).Unix()
	rejects(t, v, signKid(t, key, "k", c), ErrExpired)
	delete(c, "exp")
	rejects(t, v, signKid(t, key, "k", c), ErrMissingExp)

	// iss and aud are the provider's: chatd's own HS256 tokens have none.
	tok, _ := Mint(testSecret, 10, time.Hour)
	accepts(t, v, tok, 10)
}

func TestJWKSEndpointDownKeepsCachedKeysAndLogsIt(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"k": key})
	logs := &logtest.Buffer{}
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: 20 * time.Millisecond, MinRefetch: time.Hour}, logs)})
	accepts(t, v, signKid(t, key, "k", idpClaims("11")), 11)

	p.down.Store(true)
	testkit.WaitFor(t, 5*time.Second, "the failed-refresh log line", func() bool {
		return strings.Contains(logs.String(), "JWKS fetch failed; the cached signing keys stay in use")
	})
	if !strings.Contains(logs.String(), "cached_keys=1") || !strings.Contains(logs.String(), p.url()) {
		t.Fatalf("log line lacks the URL or the cached key count:\n%s", logs.String())
	}
	accepts(t, v, signKid(t, key, "k", idpClaims("11")), 11)

	p.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "the recovery log line", func() bool {
		return strings.Contains(logs.String(), "JWKS answers again")
	})
	accepts(t, v, signKid(t, key, "k", idpClaims("11")), 11)
}

func TestJWKSUnreachableAtStartRefusesProviderTokensUntilItAnswers(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"k": key})
	p.down.Store(true)
	logs := &logtest.Buffer{}
	v := New(Options{HSSecret: testSecret, JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: 50 * time.Millisecond}, logs)})
	if !strings.Contains(logs.String(), "cached_keys=0") {
		t.Fatalf("no log line about the failed first fetch:\n%s", logs.String())
	}
	putOff(t, v, signKid(t, key, "k", idpClaims("12")))
	putOff(t, v, signKid(t, key, "", idpClaims("12"))) // no kid: no key of its type cached
	tok, _ := Mint(testSecret, 12, time.Hour)
	accepts(t, v, tok, 12)
	p.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "the provider's token to be accepted", func() bool {
		_, err := v.Verify(signKid(t, key, "k", idpClaims("12")))
		return err == nil
	})
}

func TestUserClaimMapsProviderTokensToUserIDs(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"k": key})
	v := New(Options{HSSecret: testSecret, JWKS: newJWKS(t, p, JWKSOptions{}, nil), UserClaim: "https://chat.example/uid"})
	c := idpClaims("auth0|5f7c8ec7c33c6c004bbafe82") // a string subject, as most providers issue
	c["https://chat.example/uid"] = 42
	accepts(t, v, signKid(t, key, "k", c), 42)
	c["https://chat.example/uid"] = "43"
	accepts(t, v, signKid(t, key, "k", c), 43)
	for _, bad := range []any{"auth0|abc", "0", "-1", "042", 4.2, "4e1", 1e30, true, nil, map[string]any{"id": 1}} {
		c["https://chat.example/uid"] = bad
		rejects(t, v, signKid(t, key, "k", c), ErrSubject)
	}
	delete(c, "https://chat.example/uid")
	rejects(t, v, signKid(t, key, "k", c), ErrSubject)

	// With the default claim, sub itself must be the user id: a string
	// subject is refused, not hashed or guessed.
	v = New(Options{JWKS: newJWKS(t, p, JWKSOptions{}, nil)})
	rejects(t, v, signKid(t, key, "k", idpClaims("auth0|5f7c8ec7c33c6c004bbafe82")), ErrSubject)
	accepts(t, v, signKid(t, key, "k", idpClaims("44")), 44)
}

func TestJWKSIgnoresEncryptionAndSymmetricKeys(t *testing.T) {
	ec := newECKey(t)
	enc, err := jwkset.NewJWKFromKey(&ec.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "enc", USE: jwkset.UseEnc}})
	if err != nil {
		t.Fatal(err)
	}
	oct, err := jwkset.NewJWKFromKey(testSecret, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "oct"},
		Marshal: jwkset.JWKMarshalOptions{Private: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{enc.Marshal(), oct.Marshal()}})
	}))
	defer srv.Close()
	j, err := NewJWKS(JWKSOptions{URL: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	v := New(Options{HSSecret: testSecret, JWKS: j})
	rejects(t, v, signKid(t, ec, "enc", idpClaims("1")), ErrAlgorithm)
	// An HS256 token naming the published symmetric key is checked with
	// chatd's own secret only, never with a key from the set.
	other := []byte("another-secret-another-secret-xx")
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, idpClaims("1"))
	hs.Header["kid"] = "oct"
	tok, _ := hs.SignedString(other)
	rejects(t, v, tok, ErrSignature)
}

func TestES256WithPublicKeyFile(t *testing.T) {
	key, err := LoadPublicKey("testdata/ecdsa_public.pem")
	if err != nil {
		t.Fatal(err)
	}
	priv := privateKey(t, "ecdsa_private.pem").(*ecdsa.PrivateKey)
	v := NewVerifier(testSecret, key)
	accepts(t, v, sign(t, jwt.SigningMethodES256, priv, claims("15", future())), 15)
	rejects(t, v, sign(t, jwt.SigningMethodES256, newECKey(t), claims("15", future())), ErrSignature)
	rejects(t, NewVerifier(testSecret, rsaPublic(t)), sign(t, jwt.SigningMethodES256, priv, claims("15", future())), ErrAlgorithm)
	if _, err := LoadPublicKey("testdata/ecdsa_p384_public.pem"); err == nil || !strings.Contains(err.Error(), "P-256") {
		t.Fatalf("P-384 key: %v, want a refusal naming P-256", err)
	}
}

// A token whose kid is unknown is refused at once while the refetch limit
// holds, whatever is left of MinRefetch: it never waits for the limiter
// (which would hold the CONNECT or the HTTP request, up to the 10 s of a
// fetch, for a forged kid), and a refetch is not put off to later either.
func TestJWKSUnknownKidNeverWaitsForTheRefetchLimit(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"a": key})
	// Less than a fetch's timeout away: the limiter could be waited for.
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: 4 * time.Second}, nil)})
	rejects(t, v, signKid(t, key, "forged-1", idpClaims("1")), ErrUnknownKey) // refetches
	fetches := p.fetches.Load()
	start := time.Now()
	putOff(t, v, signKid(t, key, "forged-2", idpClaims("1")))
	if d := time.Since(start); d > time.Second {
		t.Fatalf("an unknown kid within MinRefetch of the last refetch took %v to refuse: it waited for the limit", d)
	}
	if n := p.fetches.Load(); n != fetches {
		t.Fatalf("%d fetches within MinRefetch, want %d", n, fetches)
	}
	accepts(t, v, signKid(t, key, "a", idpClaims("3")), 3)
}

// putOff checks that v answered tok "retry later" (a *chat.Error with code
// unavailable, ErrKeysUnavailable): no verdict on the token.
func putOff(t *testing.T, v *Verifier, tok string) {
	t.Helper()
	id, err := v.Verify(tok)
	if !errors.Is(err, ErrKeysUnavailable) || chat.ErrorCode(err) != chat.CodeUnavailable {
		t.Fatalf("Verify: %d %v, want the keys unavailable (code unavailable)", id, err)
	}
	if errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify: %v, a verdict on a token whose key could not be checked", err)
	}
}

// refusedOrPutOff checks that v refused tok for its unknown kid or put it
// off because the key set was fetched too recently to fetch it again.
func refusedOrPutOff(t *testing.T, v *Verifier, tok string) {
	t.Helper()
	id, err := v.Verify(tok)
	switch {
	case errors.Is(err, ErrKeysUnavailable):
		if chat.ErrorCode(err) != chat.CodeUnavailable || errors.Is(err, ErrInvalidToken) {
			t.Fatalf("Verify: %v, want code unavailable and no verdict", err)
		}
	case !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrInvalidToken):
		t.Fatalf("Verify: %d %v, want the kid refused as unknown or put off", id, err)
	}
}

// A token whose signing key the provider's key set could not be checked
// for was refused as invalid (CONNACK 0x86, HTTP 401): a client with a
// token it cannot renew (the Go SDK's static Token) gave it up for good
// during the provider's outage, or during a key rotation that came within
// MinRefetch of the last refetch. It is put off now ("retry later"), and
// accepted once the keys can be checked.
func TestATokenWhoseKeyCannotBeCheckedNowIsPutOffNotRefused(t *testing.T) {
	p := newIDP(t)
	oldKey, newKey := newECKey(t), newECKey(t)
	p.setKeys(map[string]crypto.Signer{"2025": oldKey})
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: 300 * time.Millisecond}, nil)})
	accepts(t, v, signKid(t, oldKey, "2025", idpClaims("1")), 1)

	// The provider rotates while it is down: the new kid's refetch fails.
	p.setKeys(map[string]crypto.Signer{"2026": newKey})
	p.down.Store(true)
	putOff(t, v, signKid(t, newKey, "2026", idpClaims("2")))
	// Within MinRefetch of that refetch: not fetched again, put off too.
	putOff(t, v, signKid(t, newKey, "2026", idpClaims("2")))
	p.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "the rotated key to be accepted once the provider answers", func() bool {
		_, err := v.Verify(signKid(t, newKey, "2026", idpClaims("2")))
		return err == nil
	})
	// A kid the provider does not publish, fetched for, is refused.
	testkit.WaitFor(t, 5*time.Second, "a made-up kid to be refused once the set was fetched for it", func() bool {
		_, err := v.Verify(signKid(t, newKey, "made-up", idpClaims("2")))
		return errors.Is(err, ErrUnknownKey)
	})
}

// TestATokenWithoutKidIsAcceptedOnceTheProviderAnswersAfterAnOutageAtStart:
// with the provider down when chatd started, no key is cached, and a
// provider token without a kid is put off ("retry later"). Once the
// provider answers, it must be accepted as soon as a fetch may be made
// (MinRefetch), as a token with a kid is: not only after the next periodic
// refresh (15 min by default), meanwhile telling the client to retry
// every second for nothing.
func TestATokenWithoutKidIsAcceptedOnceTheProviderAnswersAfterAnOutageAtStart(t *testing.T) {
	p := newIDP(t)
	key := newECKey(t)
	p.setKeys(map[string]crypto.Signer{"k": key})
	p.down.Store(true)
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: 50 * time.Millisecond}, nil)})
	putOff(t, v, signKid(t, key, "", idpClaims("12")))
	p.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "the provider's token without a kid to be accepted once the provider answers", func() bool {
		_, err := v.Verify(signKid(t, key, "", idpClaims("12")))
		return err == nil
	})
	if n := p.fetches.Load(); n > 10 {
		t.Errorf("%d fetches of the key set: more than one per MinRefetch", n)
	}
}

// TestARotationIsPickedUpForTokensWithoutKid: a provider whose tokens
// name no kid rotates its key. A token signed with the new key fails with
// every cached key; the set is fetched again for it (at most once per
// MinRefetch, as for an unknown kid), so that the provider's users are not
// all refused until the next periodic refresh (15 min by default). A
// token no published key signed is still refused.
func TestARotationIsPickedUpForTokensWithoutKid(t *testing.T) {
	p := newIDP(t)
	oldKey, newKey := newECKey(t), newECKey(t)
	p.setKeys(map[string]crypto.Signer{"2025": oldKey})
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: 50 * time.Millisecond}, nil)})
	accepts(t, v, signKid(t, oldKey, "", idpClaims("1")), 1)

	p.setKeys(map[string]crypto.Signer{"2026": newKey})
	testkit.WaitFor(t, 5*time.Second, "a token without kid signed with the rotated key to be accepted", func() bool {
		_, err := v.Verify(signKid(t, newKey, "", idpClaims("2")))
		return err == nil
	})
	if n := p.fetches.Load(); n > 10 {
		t.Errorf("%d fetches of the key set: more than one per MinRefetch", n)
	}
	// Within MinRefetch of the fetch that found the new key they are put
	// off ("retry later", as a made-up kid is); refused once fetched for.
	for _, tok := range []string{signKid(t, newECKey(t), "", idpClaims("3")), signKid(t, oldKey, "", idpClaims("1"))} { // unpublished, retired
		testkit.WaitFor(t, 5*time.Second, "a token without kid of no published key to be refused", func() bool {
			id, err := v.Verify(tok)
			if errors.Is(err, ErrKeysUnavailable) {
				return false
			}
			if !errors.Is(err, ErrInvalidToken) || !errors.Is(err, ErrSignature) {
				t.Fatalf("Verify: %d %v, want the signature refused", id, err)
			}
			return true
		})
	}
}

// TestATokenWithoutKidOfAKeyRotatedInSinceTheLastFetchIsPutOffNotRefused:
// the provider rotates its key less than MinRefetch after the set was
// last fetched for a token. A token without a kid signed with the new key
// cannot be checked until the set may be fetched again: it is put off
// ("retry later"), as a token naming the new kid is, not refused (a
// client would give up a good token for good), and accepted once the set
// is fetched again.
func TestATokenWithoutKidOfAKeyRotatedInSinceTheLastFetchIsPutOffNotRefused(t *testing.T) {
	p := newIDP(t)
	oldKey, newKey := newECKey(t), newECKey(t)
	p.setKeys(map[string]crypto.Signer{"2025": oldKey})
	v := New(Options{JWKS: newJWKS(t, p, JWKSOptions{Refresh: time.Hour, MinRefetch: time.Second}, nil)})
	accepts(t, v, signKid(t, oldKey, "", idpClaims("1")), 1)
	// A token of no published key fetches the set again (and is refused).
	rejects(t, v, signKid(t, newECKey(t), "", idpClaims("1")), ErrSignature)
	p.setKeys(map[string]crypto.Signer{"2026": newKey})
	putOff(t, v, signKid(t, newKey, "", idpClaims("2")))
	testkit.WaitFor(t, 5*time.Second, "the token without kid of the rotated key to be accepted once the set may be fetched", func() bool {
		_, err := v.Verify(signKid(t, newKey, "", idpClaims("2")))
		return err == nil
	})
}
