// Package testnode starts in-process chatd nodes for tests: every package
// that tests against a whole node (server, client, cmd/chatbench,
// cmd/chatctl, test/faults) starts it the same way.
//
// Env is where a test node's settings start: the test's database, loopback
// ports the kernel picks, a data dir of the test's own and the rate limits
// off. Callers add or override keys, then Start loads settings from that
// map alone (no flags, no file, not the process environment), starts the
// node and closes it when the test ends. Safe for parallel tests: nothing
// is shared between nodes but the PostgreSQL cluster.
//
// SecretEnv is Env for nodes that tests sign in to with Token (the JWT
// secret Secret); MsgTopic, ReadTopic, EventsTopic, SendPayload and
// HalfPut are what a test client speaks to such a node. The rule of each
// is written here once, not in every package's harness.
package testnode

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/server"
)

// Env returns a fresh copy of the settings every test node starts from.
func Env(t testing.TB, url string) map[string]string {
	t.Helper()
	return map[string]string{
		"CHAT_DATABASE_URL": url,
		"CHAT_MQTT_ADDR":    "127.0.0.1:0",
		"CHAT_HTTP_ADDR":    "127.0.0.1:0",
		"CHAT_DATA_DIR":     t.TempDir(),
		// One test drives many users from one address: the limits would
		// refuse it. Tests about limits set the ones they exercise.
		"CHAT_LIMIT_SEND_RATE":    "0",
		"CHAT_LIMIT_CONV_RATE":    "0",
		"CHAT_LIMIT_READ_RATE":    "0",
		"CHAT_LIMIT_API_RATE":     "0",
		"CHAT_LIMIT_CONNECT_RATE": "0",
		// Connection limits too: tests connect many clients at once, and
		// one user from many clients.
		"CHAT_LIMIT_CONNECT_USER_RATE":     "0",
		"CHAT_MAX_CONNECTIONS_PER_USER":    "0",
		"CHAT_CONNECT_BUDGET_RATE":         "0",
		"CHAT_MAX_PENDING_CONNECTS_PER_IP": "0",

		"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "0",
	}
}

// SecretEnv is Env for a node that tests sign in to with Token:
// CHAT_JWT_SECRET is Secret and shutdowns wait at most 10 s. Each of
// overlays is then copied on top, in order.
func SecretEnv(t testing.TB, url string, overlays ...map[string]string) map[string]string {
	t.Helper()
	env := Env(t, url)
	env["CHAT_JWT_SECRET"] = Secret
	env["CHAT_SHUTDOWN_TIMEOUT"] = "10s"
	for _, o := range overlays {
		for k, v := range o {
			env[k] = v
		}
	}
	return env
}

// Start starts a node with exactly env's settings and opts, logging to h
// (nil: warnings and worse to stderr), and closes it when the test ends.
func Start(t testing.TB, env map[string]string, h slog.Handler, opts ...server.Option) *server.Server {
	t.Helper()
	st, err := config.Load(nil, config.MapEnv(env))
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	if h == nil {
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	}
	srv, err := server.Start(context.Background(), st, slog.New(h), opts...)
	if err != nil {
		t.Fatalf("start chatd: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Logf("stop chatd: %v", err)
		}
	})
	return srv
}
