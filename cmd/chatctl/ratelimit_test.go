package main

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestARateLimitedRequestNamesTheRequestLimit: a people, group or search
// command refused over the caller's request budget was told to "raise
// limit_send_rate", the limit of sends, which has nothing to do with it.
// The hint names limit_api_rate for a request, and when to retry.
func TestARateLimitedRequestNamesTheRequestLimit(t *testing.T) {
	dataDir := t.TempDir()
	env := testnode.Env(t, pgtest.NewDB(t))
	env["CHAT_DATA_DIR"] = dataDir
	env["CHAT_LIMIT_API_RATE"] = "0.1"
	// Each command's connection reads the inbox once (the client's
	// catch-up without a server session), then makes its request.
	env["CHAT_LIMIT_API_BURST"] = "2"
	cenv := chatEnv(testnode.Start(t, env, nil), dataDir)
	mustOK(t, chatctl(t, cenv, "settings", "--user", "1"))
	r := chatctl(t, cenv, "settings", "--user", "1")
	wantFail(t, r, 1, "rate_limited", "limit_api_rate", "retry in ")
	if strings.Contains(r.stderr, "limit_send_rate") {
		t.Errorf("a request's refusal names the send limit:\n%s", r.stderr)
	}
}
