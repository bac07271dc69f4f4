package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadYAML feeds arbitrary bytes as the YAML configuration file: Load
// must never panic, must fail only with a *Error, and must not echo the
// JWT secret it refused. Seeds are in testdata/fuzz; .ci/fuzz.sh runs it
// for a bounded time.
func FuzzLoadYAML(f *testing.F) {
	for _, s := range []string{
		"mqtt_addr: 127.0.0.1:1883\nhttp_addr: 127.0.0.1:8080\n",
		"kafka_brokers: [a:1, b:2]\n", "kafka_brokers:\n  - a:1\n  - {x: 1}\n", "ws_allowed_origins: https://a,https://b\n",
		"max_body_bytes: -1\n", "max_body_bytes: 99999999999999999999\n", "send_timeout: 1h1m\n", "unknown: 1\n",
		"a: &x [*x]\n", "[1, 2]\n", "~\n", "", "mqtt_addr: 1\nmqtt_addr: 2\n", "jwt_secret: short\n",
		"log_level: &l debug\nlog_format: *l\n", "\xff\xfe", "dev: maybe\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "chatd.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(nil, MapEnv(map[string]string{EnvConfig: path}))
		if err == nil {
			return
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("error %v (%T) is not a *config.Error", err, err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "jwt_secret:"); ok {
				if v = strings.TrimSpace(v); len(v) >= 8 && strings.Contains(err.Error(), v) {
					t.Fatalf("the error echoes the JWT secret: %v", err)
				}
			}
		}
	})
}
