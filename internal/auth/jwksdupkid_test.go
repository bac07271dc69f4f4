package auth

import (
	"crypto"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/MicahParks/jwkset"
)

// keySetOf serves a key set publishing keys in this order.
func keySetOf(t *testing.T, keys ...jwkset.JWKMarshal) string {
	set := jwkset.JWKSMarshal{Keys: keys}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAKidSharedByKeysOfDifferentTypesVerifiesTokensOfEachType: RFC 7517
// §4.5 has distinct kids as a SHOULD, naming keys of different kty that
// share one as its example of an exception (a provider publishing an RSA
// and an EC key as alternatives, or rotating from one type to the other
// under one kid). A token is checked with the key of that kid its alg can
// use, wherever it stands in the set; only the first key of the kid was
// looked at, so a token signed with another was refused as of the wrong
// algorithm.
func TestAKidSharedByKeysOfDifferentTypesVerifiesTokensOfEachType(t *testing.T) {
	rsaKey, ecKey := rsaPrivate(t), newECKey(t)
	for name, keys := range map[string][]crypto.Signer{"RSA first": {rsaKey, ecKey}, "EC first": {ecKey, rsaKey}} {
		t.Run(name, func(t *testing.T) {
			url := keySetOf(t, publicJWK(t, "shared", keys[0]), publicJWK(t, "shared", keys[1]))
			v := New(Options{JWKS: jwksAt(t, url, JWKSOptions{}, nil)})
			accepts(t, v, signKid(t, rsaKey, "shared", idpClaims("1")), 1)
			accepts(t, v, signKid(t, ecKey, "shared", idpClaims("2")), 2)
			// Still checked with the set's keys: another EC key is not one.
			rejects(t, v, signKid(t, newECKey(t), "shared", idpClaims("3")), ErrSignature)
			rejects(t, v, signKid(t, edPrivate(t), "shared", idpClaims("3")), ErrAlgorithm)
		})
	}
}

// TestAKidSharedByKeysForDifferentAlgsVerifiesWithTheOneForTheTokensAlg:
// likewise for keys of one type whose "alg" differ: an RS256 token is
// checked with the key of its kid that allows RS256, not refused because
// the first one is for PS256.
func TestAKidSharedByKeysForDifferentAlgsVerifiesWithTheOneForTheTokensAlg(t *testing.T) {
	key := rsaPrivate(t)
	ps, rs := publicJWK(t, "shared", key), publicJWK(t, "shared", key)
	ps.ALG, rs.ALG = jwkset.AlgPS256, jwkset.AlgRS256
	v := New(Options{JWKS: jwksAt(t, keySetOf(t, ps, rs), JWKSOptions{}, nil)})
	accepts(t, v, signKid(t, key, "shared", idpClaims("1")), 1)
}
