package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// A file a setting names that does not load (missing, not a key) is a bad
// setting, as a client CRL that does not load was: chatd exits 2 naming
// the setting and where it came from, so that a supervisor told not to
// restart on 2 stops. The TLS certificate, the client CAs and the JWT
// public key used to exit 1, restarted every 2 s for ever, with errors
// naming no setting ("read TLS certificate: stat ...").
func TestAFileASettingNamesThatDoesNotLoadExitsTwoNamingTheSetting(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certPath, keyPath, "chatd")
	missing := filepath.Join(dir, "missing.pem")
	base := map[string]string{"CHAT_DATABASE_URL": pgtest.NewDB(t), "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off"}
	tls := map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath, "CHAT_MQTTS_ADDR": "127.0.0.1:0"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"missing certificate", map[string]string{"CHAT_TLS_CERT": missing, "CHAT_TLS_KEY": keyPath, "CHAT_MQTTS_ADDR": "127.0.0.1:0"},
			"tls_cert (from env CHAT_TLS_CERT)"},
		{"a key that is not one", map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": certPath, "CHAT_HTTPS_ADDR": "127.0.0.1:0"},
			"tls_cert (from env CHAT_TLS_CERT)"},
		{"missing client CAs", map[string]string{"CHAT_MQTTS_CLIENT_CA": missing}, "mqtts_client_ca (from env CHAT_MQTTS_CLIENT_CA)"},
		{"missing JWT public key", map[string]string{"CHAT_JWT_PUBLIC_KEY": missing}, "jwt_public_key (from env CHAT_JWT_PUBLIC_KEY)"},
		{"a private key for the JWT public key", map[string]string{"CHAT_JWT_PUBLIC_KEY": keyPath}, "jwt_public_key (from env CHAT_JWT_PUBLIC_KEY)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for _, m := range []map[string]string{base, tc.env} {
				for k, v := range m {
					env[k] = v
				}
			}
			if _, ok := tc.env["CHAT_MQTTS_CLIENT_CA"]; ok {
				for k, v := range tls {
					env[k] = v
				}
			}
			code, _, errOut := chatd(t, t.Context(), env)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want 2), stderr lacks %q:\n%s", code, tc.want, errOut)
			}
		})
	}
}
