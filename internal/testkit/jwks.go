package testkit

import (
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/MicahParks/jwkset"
)

// JWKSServer serves, on loopback until the test ends, an identity
// provider's key set holding key's public half under kid, and returns the
// set's URL.
func JWKSServer(t testing.TB, key *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/certs"
}
