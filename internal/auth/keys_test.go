package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// Test keys (testdata/README.md).

func readPEM(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func privateKey(t testing.TB, name string) crypto.Signer {
	t.Helper()
	block, _ := pem.Decode(readPEM(t, name))
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}

func rsaPrivate(t testing.TB) *rsa.PrivateKey {
	return privateKey(t, "rsa_private.pem").(*rsa.PrivateKey)
}
func edPrivate(t testing.TB) ed25519.PrivateKey {
	return privateKey(t, "ed25519_private.pem").(ed25519.PrivateKey)
}

func rsaPublic(t testing.TB) *rsa.PublicKey {
	t.Helper()
	k, err := ParsePublicKey(readPEM(t, "rsa_public.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k.(*rsa.PublicKey)
}

func edPublic(t testing.TB) ed25519.PublicKey {
	t.Helper()
	k, err := ParsePublicKey(readPEM(t, "ed25519_public.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k.(ed25519.PublicKey)
}

// sign makes a token with arbitrary claims.
func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", m.Alg(), err)
	}
	return s
}

// unsigned builds header.payload. with any header, e.g. alg none.
func unsigned(header, claims map[string]any, sig string) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "." + sig
}
