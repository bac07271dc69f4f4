// Package benchtarget is the chatd a load tool (chatbench, connbench)
// drives, as the flags they share name it: its MQTT address, its HTTP API
// and the secret the tools sign their users' tokens with.
package benchtarget

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/chatd/chatd/internal/auth"
)

// Target is a chatd node: the flags fill it, Resolve completes it.
type Target struct {
	Broker    string // MQTT TCP address, host:port
	HTTPBase  string // the HTTP API, http://host:port without a trailing slash (after Resolve)
	DataDir   string // chatd's data dir, holding jwt.secret
	JWTSecret string // chatd's HS256 secret; "" reads DataDir's
}

// AddFlags defines -broker, -http, -data-dir and -jwt-secret on fs, their
// defaults from chatd's own variables (CHAT_MQTT_ADDR, CHAT_DATA_DIR,
// CHAT_JWT_SECRET; CHAT_HTTP_ADDR through Resolve).
func (t *Target) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.Broker, "broker", envOr("CHAT_MQTT_ADDR", "127.0.0.1:1883"), "MQTT TCP address host:port (default $CHAT_MQTT_ADDR)")
	fs.StringVar(&t.HTTPBase, "http", "", "chatd's HTTP API base URL (default http://$CHAT_HTTP_ADDR, else http://127.0.0.1:8080)")
	fs.StringVar(&t.DataDir, "data-dir", envOr("CHAT_DATA_DIR", "./data"), "chatd's data dir holding jwt.secret")
	fs.StringVar(&t.JWTSecret, "jwt-secret", os.Getenv("CHAT_JWT_SECRET"), "chatd's HS256 secret to mint tokens (default $CHAT_JWT_SECRET, else -data-dir's jwt.secret)")
}

// Resolve gives HTTPBase its default when -http was not given, and drops
// its trailing slash.
func (t *Target) Resolve() {
	if t.HTTPBase == "" {
		t.HTTPBase = "http://" + envOr("CHAT_HTTP_ADDR", "127.0.0.1:8080")
	}
	t.HTTPBase = strings.TrimSuffix(t.HTTPBase, "/")
}

// Secret is the secret that signs tokens chatd accepts, as chatctl finds
// it: -jwt-secret, else the data dir's jwt.secret.
func (t *Target) Secret() ([]byte, error) {
	if t.JWTSecret != "" {
		return []byte(t.JWTSecret), nil
	}
	s, err := auth.LoadSecret(t.DataDir)
	if err != nil {
		return nil, fmt.Errorf("no JWT secret: pass -jwt-secret (chatd's CHAT_JWT_SECRET) or -data-dir of chatd (holding jwt.secret): %w", err)
	}
	return s, nil
}

// envOr is the environment variable k, or def when it is unset or empty.
func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
