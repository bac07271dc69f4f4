package webpushtest

import (
	"crypto/ecdh"
	"encoding/base64"
	"testing"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecryptOpensTheRFC8291Example holds the decrypter that the push tests
// trust to RFC 8291's Appendix A: its keys, auth secret and body give
// the RFC's plaintext.
func TestDecryptOpensTheRFC8291Example(t *testing.T) {
	ua, err := ecdh.P256().NewPrivateKey(b64(t, "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()); got != "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4" {
		t.Fatalf("ua_public = %s", got)
	}
	body := b64(t, "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
	pt, err := Decrypt(body, ua, b64(t, "BTBZMqHH6r4Tts7J_aSIgg"))
	if err != nil {
		t.Fatal(err)
	}
	if string(pt) != "When I grow up, I want to be a watermelon" {
		t.Errorf("plaintext = %q", pt)
	}
	// A wrong auth secret must not open it.
	if _, err := Decrypt(body, ua, make([]byte, 16)); err == nil {
		t.Error("decrypted with the wrong auth secret")
	}
}
