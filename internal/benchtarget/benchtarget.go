// Package benchtarget is the chatd a load tool (chatbench, connbench)
// drives, as the flags they share name it: its MQTT address, its HTTP API
// and the secret the tools sign their users' tokens with; and how the
// tools call that API as one of their users.
package benchtarget

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
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

// Call makes one call to the HTTP API as the user token was minted for:
// body, when not nil, goes as JSON; a 2xx reply is decoded into out when
// out is not nil, any other status is an error with the reply's text.
func (t *Target) Call(ctx context.Context, hc *http.Client, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.HTTPBase+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is chatd's HTTP API at %s? set -http)", method, path, err, t.HTTPBase)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: bad reply %q", method, path, raw)
		}
	}
	return nil
}

// envOr is the environment variable k, or def when it is unset or empty.
func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
