package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// fuzzSecret is the HS256 secret of the fuzz verifier and seed corpus.
var fuzzSecret = []byte("fuzz-secret-fuzz-secret-fuzz-secret!")

// farFuture is 2100-01-01: corpus tokens stay valid for the life of the code.
const farFuture = 4102444800

var writeCorpus = flag.Bool("write-corpus", false, "regenerate testdata/fuzz/FuzzVerify")

// seedTokens are valid tokens for every algorithm plus near-misses.
func seedTokens(t testing.TB) []string {
	rsaKey, edKey := rsaPrivate(t), edPrivate(t)
	c := func(sub string) jwt.MapClaims { return jwt.MapClaims{"sub": sub, "exp": farFuture} }
	pubPEM := readPEM(t, "rsa_public.pem")
	out := []string{
		sign(t, jwt.SigningMethodHS256, fuzzSecret, c("1")),
		sign(t, jwt.SigningMethodHS256, fuzzSecret, jwt.MapClaims{"sub": "42", "exp": farFuture, "iat": 1700000000, "nbf": 1700000000}),
		sign(t, jwt.SigningMethodRS256, rsaKey, c("7")),
		sign(t, jwt.SigningMethodEdDSA, edKey, c("9223372036854775807")),
		// Near-misses: each must be rejected.
		sign(t, jwt.SigningMethodHS256, pubPEM, c("1")),     // HS/RS confusion
		sign(t, jwt.SigningMethodHS256, fuzzSecret, c("0")), // bad sub
		sign(t, jwt.SigningMethodHS256, fuzzSecret, c("1e3")),
		sign(t, jwt.SigningMethodHS256, fuzzSecret, c(" 7")),
		sign(t, jwt.SigningMethodHS256, fuzzSecret, jwt.MapClaims{"sub": "1"}),           // no exp
		sign(t, jwt.SigningMethodHS256, fuzzSecret, jwt.MapClaims{"sub": "1", "exp": 1}), // expired
		sign(t, jwt.SigningMethodHS512, fuzzSecret, c("1")),                              // wrong HS
		sign(t, jwt.SigningMethodPS256, rsaKey, c("1")),                                  // wrong RSA
		unsigned(map[string]any{"alg": "none", "typ": "JWT"}, map[string]any{"sub": "1", "exp": farFuture}, ""),
		unsigned(map[string]any{"alg": "HS256", "alg ": "none"}, map[string]any{"sub": "1", "exp": farFuture}, "AAAA"),
		"",
		"..",
		"a.b.c",
	}
	return out
}

// signedByKey checks a token's signature with the crypto primitives
// directly, independently of the jwt library: the oracle of FuzzVerify.
func signedByKey(tok string, secret []byte, rsaPub *rsa.PublicKey, edPub ed25519.PublicKey) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	enc := base64.RawURLEncoding.Strict()
	hb, err := enc.DecodeString(parts[0])
	if err != nil {
		return false
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(hb, &h) != nil {
		return false
	}
	input := []byte(parts[0] + "." + parts[1])
	sum := sha256.Sum256(input)
	switch h.Alg {
	case "HS256":
		m := hmac.New(sha256.New, secret)
		m.Write(input)
		return len(secret) > 0 && hmac.Equal(sig, m.Sum(nil))
	case "RS256":
		return rsaPub != nil && rsa.VerifyPKCS1v15(rsaPub, crypto.SHA256, sum[:], sig) == nil
	case "EdDSA":
		return edPub != nil && ed25519.Verify(edPub, input, sig)
	}
	return false
}

// FuzzVerify: Verify never panics, every rejection is ErrInvalidToken
// without the token in its text, and an accepted token is one the
// configured keys really signed, with a positive canonical sub.
func FuzzVerify(f *testing.F) {
	for _, s := range seedTokens(f) {
		f.Add(s)
	}
	rsaPub, edPub := rsaPublic(f), edPublic(f)
	verifiers := []struct {
		v      *Verifier
		secret []byte
		rsa    *rsa.PublicKey
		ed     ed25519.PublicKey
	}{
		{NewVerifier(fuzzSecret, rsaPub), fuzzSecret, rsaPub, nil},
		{NewVerifier(fuzzSecret, edPub), fuzzSecret, nil, edPub},
		{NewVerifier(nil, rsaPub), nil, rsaPub, nil},
	}
	f.Fuzz(func(t *testing.T, tok string) {
		for _, c := range verifiers {
			id, err := c.v.Verify(tok)
			if err != nil {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("error %v is not ErrInvalidToken", err)
				}
				if id != 0 {
					t.Fatalf("user %d returned with an error", id)
				}
				if len(tok) >= 16 && strings.Contains(err.Error(), tok) {
					t.Fatalf("error text contains the token")
				}
				continue
			}
			if id <= 0 {
				t.Fatalf("accepted with user id %d", id)
			}
			if !signedByKey(tok, c.secret, c.rsa, c.ed) {
				t.Fatalf("accepted a token not signed by the configured keys: %q", tok)
			}
			var claims struct {
				Sub string `json:"sub"`
			}
			payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
			if json.Unmarshal(payload, &claims) != nil || claims.Sub != strconv.FormatInt(id, 10) {
				t.Fatalf("accepted user %d but sub is %q", id, claims.Sub)
			}
		}
	})
}

// TestFuzzCorpusSeeds checks the committed corpus: valid tokens are
// accepted, the rest rejected, so the corpus keeps exercising both paths.
func TestFuzzCorpusSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzVerify")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(fuzzSecret, rsaPublic(t))
	ve := NewVerifier(fuzzSecret, edPublic(t))
	accepted := 0
	for _, e := range ents {
		raw, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		lines := strings.SplitN(string(raw), "\n", 3)
		if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "string(") {
			t.Fatalf("%s is not a corpus file", e.Name())
		}
		tok, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		_, err1 := v.Verify(tok)
		_, err2 := ve.Verify(tok)
		if err1 == nil || err2 == nil {
			accepted++
		}
	}
	if accepted < 4 {
		t.Errorf("only %d corpus tokens verify; want the 4 valid seeds (HS256 x2, RS256, EdDSA)", accepted)
	}
	if len(ents)-accepted < 10 {
		t.Errorf("only %d corpus tokens are rejected", len(ents)-accepted)
	}
}

// TestWriteFuzzCorpus regenerates the seed corpus (-args -write-corpus).
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("pass -args -write-corpus to regenerate testdata/fuzz/FuzzVerify")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzVerify")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, tok := range seedTokens(t) {
		body := fmt.Sprintf("go test fuzz v1\nstring(%q)\n", tok)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
