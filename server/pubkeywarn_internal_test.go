package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/logtest"
)

// TestAPublicKeyWithoutIssuerOrAudienceIsWarnedAboutAtStart: with
// jwt_public_key and neither jwt_issuer nor jwt_audience, every token the
// key signs is accepted, whatever application it was issued for (the
// rule jwks_url is held to). Refusing it at start would stop deployments
// that work, so it is a warning naming the settings to set; none with
// either set, or without a provider key.
func TestAPublicKeyWithoutIssuerOrAudienceIsWarnedAboutAtStart(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// settings names a public key file, with issuer and audience.
	settings := func(issuer string, audience ...string) config.Settings {
		st := config.Settings{JWTPublicKey: "/etc/chatd/idp.pem"}
		st.JWTIssuer, st.JWTAudience = issuer, audience
		return st
	}
	for _, c := range []struct {
		name string
		st   config.Settings
		pub  any
		warn bool
	}{
		{"neither", settings(""), &key.PublicKey, true},
		{"issuer", settings("https://idp.example"), &key.PublicKey, false},
		{"audience", settings("", "chatd"), &key.PublicKey, false},
		{"no provider key", config.Settings{}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs logtest.Buffer
			s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
			if _, err := s.newVerifier(c.st, []byte("0123456789abcdef0123456789abcdef"), c.pub); err != nil {
				t.Fatal(err)
			}
			l := logs.String()
			warned := strings.Contains(l, "level=WARN") && strings.Contains(l, "jwt_public_key")
			if warned != c.warn {
				t.Fatalf("warned %v, want %v; log:\n%s", warned, c.warn, l)
			}
			if c.warn && (!strings.Contains(l, "jwt_audience") || !strings.Contains(l, "jwt_issuer") || !strings.Contains(l, "/etc/chatd/idp.pem")) {
				t.Errorf("the warning does not name jwt_audience, jwt_issuer and the key file:\n%s", l)
			}
		})
	}
}
