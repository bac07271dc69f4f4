package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAV5ConnectPutOffUntilTheKeySetMayBeFetchedAgainIsToldWhen: an
// identity provider's token naming a key not cached, within 30 s of the
// key set's last fetch, gets CONNACK 0x88 (retry later): with the user
// property retryAfter saying when the set may be fetched again, as a
// connect refused by a rate says it, not left to guess (a device that
// retries every second is put off every second until then).
func TestAV5ConnectPutOffUntilTheKeySetMayBeFetchedAgainIsToldWhen(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp := testkit.JWKSServer(t, key, "published")
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_JWKS_URL": idp, "CHAT_JWT_AUDIENCE": "chatd"})
	sign := func(kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "21", "aud": "chatd", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The first unknown kid fetches the set again: not there, refused.
	if _, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "kc-21", Password: sign("made-up"), Clean: true}); err == nil || ack.ReasonCode != 0x86 {
		t.Fatalf("v5 CONNECT with an unknown kid fetched for: %v 0x%02x, want 0x86", err, ack.ReasonCode)
	}
	_, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "kc-21", Password: sign("rotated-in"), Clean: true})
	if err == nil || ack.ReasonCode != 0x88 {
		t.Fatalf("v5 CONNECT with an unknown kid right after a fetch: %v 0x%02x, want 0x88", err, ack.ReasonCode)
	}
	s, err := strconv.Atoi(userProp(ack.Properties.User, "retryAfter"))
	if err != nil || s < 25 || s > 31 {
		t.Errorf("CONNACK 0x88: user properties %+v, want retryAfter about 30 (s): when the key set may be fetched again", ack.Properties.User)
	}
}
