package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAChatCommandGivesUpAfterItsTimeoutWhenChatdCannotStore: --timeout
// said how long to wait for chatd, but bounded only the connection: a
// send that chatd answered "unavailable" (its database stuck) was retried
// until Ctrl-C (chatctl's client keeps nothing once it exits). It ends
// within --timeout now, exit 1, saying how to retry it without a
// duplicate.
func TestAChatCommandGivesUpAfterItsTimeoutWhenChatdCannotStore(t *testing.T) {
	dataDir := t.TempDir()
	url := pgtest.NewDB(t)
	env := testnode.Env(t, url)
	env["CHAT_DATA_DIR"] = dataDir
	srv := testnode.Start(t, env, nil)
	cenv := chatEnv(srv, dataDir)
	mustOK(t, chatctl(t, cenv, "send", "--user", "1", "--peer", "2", "--body", "hello"))

	release := pgtest.LockTable(t, url, "message")
	defer release()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--user", "1", "--conversation", "1", "--body", "stuck", "--timeout", "2s",
			"--client-msg-id", "3f1b8a52-6c1e-4d7a-9a0e-2b6f4c1d9e01"}, "--client-msg-id 3f1b8a52-6c1e-4d7a-9a0e-2b6f4c1d9e01"},
	} {
		start := time.Now()
		done := make(chan result, 1)
		go func() { done <- chatctl(t, cenv, c.args...) }()
		select {
		case r := <-done:
			wantFail(t, r, 1, c.want)
			if strings.Contains(r.stderr, "send: send:") {
				t.Errorf("the command is named twice:\n%s", r.stderr)
			}
			if d := time.Since(start); d > 6*time.Second {
				t.Errorf("%s took %v with --timeout 2s", c.args[0], d)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s with --timeout 2s still runs after 20s", c.args[0])
		}
	}
}

// TestAChatCommandGivesUpAfterItsTimeoutWhenChatdDoesNotAnswer: the
// requests of a chat command (history, search, ...) waited for the
// client's own 15 s whatever --timeout said. The whole command ends within
// --timeout now, exit 1, saying that chatd did not answer in time.
func TestAChatCommandGivesUpAfterItsTimeoutWhenChatdDoesNotAnswer(t *testing.T) {
	dataDir := t.TempDir()
	url := pgtest.NewDB(t)
	env := testnode.Env(t, url)
	env["CHAT_DATA_DIR"] = dataDir
	// chatd answers a request it cannot serve "unavailable" after its
	// send timeout: longer than the client's own request timeout, it does
	// not answer at all as far as the command can tell.
	env["CHAT_SEND_TIMEOUT"] = "30s"
	srv := testnode.Start(t, env, nil)
	cenv := chatEnv(srv, dataDir)
	mustOK(t, chatctl(t, cenv, "send", "--user", "1", "--peer", "2", "--body", "hello"))

	release := pgtest.LockTable(t, url, "message")
	defer release()
	for _, args := range [][]string{
		{"history", "--user", "1", "--conversation", "1"},
		{"search", "--user", "1", "--query", "hello"},
	} {
		start := time.Now()
		done := make(chan result, 1)
		go func() { done <- chatctl(t, cenv, append(args, "--timeout", "2s")...) }()
		select {
		case r := <-done:
			wantFail(t, r, 1, "did not answer within --timeout 2s")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s took %v with --timeout 2s", args[0], d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s with --timeout 2s still runs after 30s", args[0])
		}
	}
}
