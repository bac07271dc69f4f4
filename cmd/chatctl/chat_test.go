package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// startChatd runs a chatd node in-process whose JWT secret is generated in
// dataDir, as a fresh local install does.
func startChatd(t *testing.T, dataDir string) *server.Server {
	t.Helper()
	env := testnode.Env(t, pgtest.NewDB(t))
	env["CHAT_DATA_DIR"] = dataDir
	return testnode.Start(t, env, nil)
}

// chatEnv is chatctl's environment for a local chatd: only the data dir
// (for jwt.secret) and the MQTT address, as a user would have.
func chatEnv(srv *server.Server, dataDir string) map[string]string {
	return map[string]string{"CHAT_DATA_DIR": dataDir, "CHAT_MQTT_ADDR": srv.MQTTAddr()}
}

// startChatdEnv starts a chatd on a data dir of its own and answers it
// and chatctl's environment for it (chatEnv's).
func startChatdEnv(t *testing.T) (*server.Server, map[string]string) {
	t.Helper()
	dataDir := t.TempDir()
	srv := startChatd(t, dataDir)
	return srv, chatEnv(srv, dataDir)
}

// startChatdForFiles is startChatdEnv with chatd's HTTP address in the
// environment too, as the commands that move files need.
func startChatdForFiles(t *testing.T) (*server.Server, map[string]string) {
	t.Helper()
	srv, env := startChatdEnv(t)
	env["CHAT_HTTP_ADDR"] = srv.HTTPAddr()
	return srv, env
}

// startChatctl runs a long-running command (tail) in the background.
func startChatctl(t *testing.T, env map[string]string, args ...string) (stdout, stderr *logtest.Buffer, done <-chan int) {
	t.Helper()
	return startChatctlMinting(t, env, nil, args...)
}

// startChatctlMinting is startChatctl minting the users' tokens with mint
// (nil: as chatctl does).
func startChatctlMinting(t *testing.T, env map[string]string, mint func([]byte, int64) (string, error), args ...string) (stdout, stderr *logtest.Buffer, done <-chan int) {
	t.Helper()
	stdout, stderr = &logtest.Buffer{}, &logtest.Buffer{}
	a := &app{stdout: stdout, stderr: stderr, lookupenv: config.MapEnv(env), environ: environ(env), mint: mint}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	ch := make(chan int, 1)
	go func() {
		defer cancel()
		ch <- run(ctx, args, a)
	}()
	t.Cleanup(cancel)
	return stdout, stderr, ch
}

// waitExit waits up to timeout for a command started by startChatctl to
// exit and returns its code; if it is still running, the test fails with
// what (what the command did not do in time) and its output.
func waitExit(t *testing.T, done <-chan int, timeout time.Duration, stdout, stderr *logtest.Buffer, what string) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(timeout):
		t.Fatalf("%s within %v; stdout:\n%s\nstderr:\n%s", what, timeout, stdout, stderr)
		return 0
	}
}

func waitForText(t *testing.T, buf *logtest.Buffer, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(buf.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v; got:\n%s", text, timeout, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestChatCommandsHelpShowsExamples(t *testing.T) {
	for _, name := range []string{"send", "forward", "edit", "recall", "react", "tail", "inbox", "history", "read"} {
		r := mustOK(t, chatctl(t, nil, name, "--help"))
		if !strings.Contains(r.stdout, "Example:\n  chatctl "+name+" --user ") {
			t.Errorf("%s --help has no working example:\n%s", name, r.stdout)
		}
		for _, flag := range []string{"-broker", "-user", "-token"} {
			if !strings.Contains(r.stdout, flag) {
				t.Errorf("%s --help lacks %s", name, flag)
			}
		}
	}
}

// TestSendTailInboxHistoryRead walks a newcomer's session against a local
// chatd with nothing but its data dir: tokens are minted from jwt.secret.
func TestSendTailInboxHistoryRead(t *testing.T) {
	dataDir := t.TempDir()
	srv := startChatd(t, dataDir)
	env := chatEnv(srv, dataDir)

	stdout, stderr, done := startChatctl(t, env, "tail", "--user", "2", "--count", "2")
	waitForText(t, stderr, "following the events of user 2", 15*time.Second)

	r := mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "hello"))
	if got := strings.TrimSpace(r.stdout); got != "[conv 1 #1] user 1: hello" {
		t.Fatalf("send printed %q", got)
	}
	mustOK(t, chatctl(t, env, "send", "--user", "2", "--conversation", "1", "--body", "hi back"))

	if code := waitExit(t, done, 15*time.Second, stdout, stderr, "tail did not see 2 messages"); code != 0 {
		t.Fatalf("tail exited %d: %s", code, stderr.String())
	}
	want := "[conv 1 #1] user 1: hello\n[conv 1 #2] user 2: hi back\n"
	var msgLines strings.Builder
	for _, l := range strings.SplitAfter(stdout.String(), "\n") {
		if strings.HasPrefix(l, "[conv 1 #") {
			msgLines.WriteString(l)
		}
	}
	if got := msgLines.String(); got != want {
		t.Errorf("tail printed:\n%s\nwant messages:\n%s", stdout.String(), want)
	}
	if !strings.Contains(stdout.String(), `[conv 1] direct conversation "" created by user 1 with members [1 2]`) {
		t.Errorf("tail did not show the membership event:\n%s", stdout.String())
	}

	r = mustOK(t, chatctl(t, env, "inbox", "--user", "1"))
	for _, s := range []string{"CONV", "DIRECT", "#2", "user 2: hi back"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("inbox lacks %q:\n%s", s, r.stdout)
		}
	}
	r = mustOK(t, chatctl(t, env, "history", "--user", "1", "--conversation", "1"))
	if r.stdout != want {
		t.Errorf("history printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustOK(t, chatctl(t, env, "read", "--user", "1", "--conversation", "1"))
	if got := strings.TrimSpace(r.stdout); got != "[conv 1] user 1 read up to #2" {
		t.Errorf("read printed %q", got)
	}
	r = mustOK(t, chatctl(t, env, "read", "--user", "1", "--conversation", "1", "--seq", "1"))
	if got := strings.TrimSpace(r.stdout); got != "[conv 1] user 1 had already read up to #2" {
		t.Errorf("second read printed %q", got)
	}
	r = mustOK(t, chatctl(t, env, "inbox", "--user", "1", "--json"))
	if !strings.Contains(r.stdout, `"unread": 0`) {
		t.Errorf("inbox --json after read:\n%s", r.stdout)
	}

	// An explicit --token and --broker work without any environment.
	secret, err := auth.LoadSecret(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := auth.Mint(secret, 2, time.Minute)
	r = mustOK(t, chatctl(t, nil, "history", "--user", "2", "--conversation", "1", "--limit", "1",
		"--broker", "mqtt://"+srv.MQTTAddr(), "--token", tok))
	if r.stdout != "[conv 1 #2] user 2: hi back\n" {
		t.Errorf("history --limit 1 printed %q", r.stdout)
	}
}

func TestChatCommandsSayWhatToDo(t *testing.T) {
	srv, env := startChatdEnv(t)

	// Nothing listens on the broker address.
	closed := testkit.FreeAddr(t)
	wantFail(t, chatctl(t, env, "inbox", "--user", "1", "--broker", "mqtt://"+closed), 1,
		"connection refused", "is chatd running?", "go run ./cmd/chatd")

	// A token chatd does not know.
	wantFail(t, chatctl(t, env, "inbox", "--user", "1", "--secret", strings.Repeat("x", 32)), 1,
		"refused the token for user 1", "--data-dir")

	// No secret to mint with.
	wantFail(t, chatctl(t, map[string]string{"CHAT_DATA_DIR": t.TempDir(), "CHAT_MQTT_ADDR": srv.MQTTAddr()}, "inbox", "--user", "1"), 1,
		"jwt.secret does not exist", "--token")

	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "x"))
	wantFail(t, chatctl(t, env, "send", "--user", "3", "--conversation", "1", "--body", "let me in"), 1,
		"user 3 is not a member of conversation 1", "chatctl inbox --user 3")
	wantFail(t, chatctl(t, env, "history", "--user", "3", "--conversation", "1"), 1,
		"user 3 is not a member of conversation 1")

	// Usage errors are caught before connecting.
	wantFail(t, chatctl(t, env, "send", "--user", "1", "--body", "x"), 2, "exactly one of --conversation ID and --peer USER")
	wantFail(t, chatctl(t, env, "send", "--user", "1", "--peer", "2"), 2, "--body is required")
	wantFail(t, chatctl(t, env, "history", "--user", "1"), 2, "--conversation is required")
	wantFail(t, chatctl(t, env, "tail"), 2, "--user is required")
}

func TestSendReadsBodyFromStdin(t *testing.T) {
	_, env := startChatdEnv(t)
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdinR: strings.NewReader("from stdin\n"), lookupenv: config.MapEnv(env), environ: environ(env)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := run(ctx, []string{"send", "--user", "1", "--peer", "2", "--body", "-", "--json"}, a); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"seq": 1`) {
		t.Errorf("send --json printed %s", out.String())
	}
	r := mustOK(t, chatctl(t, env, "history", "--user", "2", "--conversation", "1"))
	if r.stdout != fmt.Sprintf("[conv 1 #1] user 1: %s\n", "from stdin") {
		t.Errorf("history printed %q", r.stdout)
	}
}

// TestTheClientsLinesFollowLogFormat: chatctl logs as chatd is set to
// (log_format, log_level), but the MQTT client of the commands that act
// as a user always wrote text lines, so with CHAT_LOG_FORMAT=json its
// lines came mixed into chatctl's JSON ones.
func TestTheClientsLinesFollowLogFormat(t *testing.T) {
	_, env := startChatdEnv(t)
	env["CHAT_LOG_FORMAT"], env["CHAT_LOG_LEVEL"] = "json", "debug"
	r := mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "hello"))
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("no log line at debug level")
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "{") {
			t.Errorf("not a JSON line with CHAT_LOG_FORMAT=json: %s", l)
		}
	}
}
