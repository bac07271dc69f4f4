package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testcert"
)

func TestMain(m *testing.M) {
	if os.Getenv(reexecProbe) != "" {
		probeReexec() // the child of TestChatdReexecutesItselfWithSmallStacks
		return
	}
	pgtest.Main(m)
}

// chatd runs chatd's main with args and env as the whole environment.
func chatd(t *testing.T, ctx context.Context, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb, envOf(env))
	return code, out.String(), errb.String()
}

// running is a chatd started by startChatd: its logs, the exit code it
// returns (once), and cancel, which stops it as SIGINT does.
type running struct {
	logs   *logtest.Buffer
	done   chan int
	cancel context.CancelFunc
}

// startChatd runs chatd with env on a goroutine; the test's end stops it.
func startChatd(t *testing.T, env map[string]string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{logs: &logtest.Buffer{}, done: make(chan int, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() { r.done <- run(ctx, nil, &bytes.Buffer{}, r.logs, envOf(env)) }()
	return r
}

// envOf is env as os.Environ would list it.
func envOf(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func TestHelpPrintsUsageWithEverySettingAndExitsZero(t *testing.T) {
	for _, arg := range []string{"--help", "-help", "-h"} {
		code, out, errOut := chatd(t, t.Context(), nil, arg)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", arg, code, errOut)
		}
		if !strings.HasPrefix(out, "Usage: chatd [flags]\n") {
			t.Fatalf("%s printed %q", arg, out)
		}
		for _, k := range config.Keys() {
			flag := "-" + strings.ReplaceAll(k, "_", "-")
			if !strings.Contains(out, "  "+flag) || !strings.Contains(out, "CHAT_"+strings.ToUpper(k)) {
				t.Errorf("%s: usage lacks %s / CHAT_%s", arg, flag, strings.ToUpper(k))
			}
		}
		for _, f := range []string{"-version", "-config PATH", "-help"} {
			if !strings.Contains(out, f) {
				t.Errorf("%s: usage lacks %s", arg, f)
			}
		}
	}
}

func TestVersionPrintsModuleRevisionAndTime(t *testing.T) {
	re := regexp.MustCompile(`^chatd \S+ \(revision \S+, \S+\) go\S+ \w+/\w+\n$`)
	for _, arg := range []string{"--version", "-version"} {
		code, out, errOut := chatd(t, t.Context(), nil, arg)
		if code != 0 || errOut != "" || !re.MatchString(out) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out, errOut)
		}
	}
}

func TestBadSettingExitsTwoNamingTheSource(t *testing.T) {
	code, out, errOut := chatd(t, t.Context(), map[string]string{"CHAT_MAX_MEMBERS": "lots"})
	if code != 2 || out != "" || !strings.Contains(errOut, "max_members (from env CHAT_MAX_MEMBERS)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestHelpListsTheTracingVariables(t *testing.T) {
	_, out, _ := chatd(t, t.Context(), nil, "-help")
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME", "OTEL_SDK_DISABLED"} {
		if !strings.Contains(out, v) {
			t.Errorf("usage lacks %s", v)
		}
	}
}

func TestBadTracingVariableExitsTwoNamingTheVariable(t *testing.T) {
	code, out, errOut := chatd(t, t.Context(), map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"})
	if code != 2 || out != "" || !strings.Contains(errOut, `OTEL_TRACES_SAMPLER="sometimes"`) || !strings.Contains(errOut, "parentbased_always_on") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A misspelt variable (CHAT_DATABSE_URL) used to be ignored without a
// word: chatd came up on the embedded PostgreSQL instead of the intended
// one. Every CHAT_ variable chatd does not know is named in a warning,
// with the setting it was probably meant to be.
func TestAMisspeltChatVariableIsNamedInAWarningWithTheSettingItResembles(t *testing.T) {
	env := map[string]string{
		"CHAT_DATABASE_URL": pgtest.NewDB(t), "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off",
		"CHAT_SHUTDOWN_TIMEOUT": "10s",
		"CHAT_MAX_MEMBER":       "5",      // typo of CHAT_MAX_MEMBERS
		"CHAT_CONFIG":           "",       // chatd's own, not a setting: no warning
		"CHAT_PPROF_ADDR":       "",       // likewise
		"CHAT_TOKEN":            "abc",    // chatctl's or a script's: named, nothing suggested
		"OTHER_MAX_MEMBER":      "whatev", // not chatd's prefix: ignored
	}
	c := startChatd(t, env)
	logs := c.logs
	waitLog(t, logs, regexp.MustCompile(`msg="chatd ready"`), "ready line")
	c.cancel()
	if code := <-c.done; code != 0 {
		t.Fatalf("chatd exited %d:\n%s", code, logs.String())
	}
	out := logs.String()
	if !regexp.MustCompile(`level=WARN msg="unknown environment variable ignored" var=CHAT_MAX_MEMBER did_you_mean=CHAT_MAX_MEMBERS`).MatchString(out) {
		t.Errorf("no warning naming CHAT_MAX_MEMBER and CHAT_MAX_MEMBERS:\n%s", out)
	}
	if !regexp.MustCompile(`level=WARN msg="unknown environment variable ignored" var=CHAT_TOKEN\n`).MatchString(out) {
		t.Errorf("no warning naming CHAT_TOKEN (without a suggestion):\n%s", out)
	}
	for _, v := range []string{"CHAT_CONFIG", "CHAT_PPROF_ADDR", "OTHER_MAX_MEMBER", "abc", "whatev"} {
		if strings.Contains(out, "var="+v) || strings.Contains(out, v+"\n") {
			t.Errorf("warning about %s:\n%s", v, out)
		}
	}
}

// A SIGTERM or Ctrl-C while chatd is still starting (its database slow to
// come up, a deploy rolled back) is a requested stop, not a failure: exit
// status 0 and no ERROR line, so that supervisors and alerts see it as
// the stop it is.
func TestAStopRequestedWhileStartingExitsZeroWithoutAnError(t *testing.T) {
	env := map[string]string{
		"CHAT_DATABASE_URL": pgtest.NewDB(t), "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off",
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the start could finish
	logs := &logtest.Buffer{}
	if code := run(ctx, nil, &bytes.Buffer{}, logs, envOf(env)); code != 0 {
		t.Fatalf("chatd stopped while starting exited %d:\n%s", code, logs.String())
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("an ERROR line for a requested stop:\n%s", logs.String())
	}
}

// A database URL chatd cannot use as written (one that does not parse, or
// whose pool_max_conns contradicts db_max_conns) is a bad setting, found
// only when the database is opened: it exits 2 like the settings Load
// refuses, naming the setting and where it came from, so that a
// supervisor told not to restart on 2 (deploy/chatd.service,
// RestartPreventExitStatus=2) stops instead of restarting it every 2 s
// for ever. It used to exit 1. A database that does not answer is not a
// setting's fault: it still exits 1, to be started again.
func TestADatabaseURLThatCannotBeUsedExitsTwoNamingItAndAnUnreachableDatabaseOne(t *testing.T) {
	base := map[string]string{"CHAT_DATA_DIR": t.TempDir(), "CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		code int
		want string
	}{
		{"unparsable", map[string]string{"CHAT_DATABASE_URL": "postgres://chat:hunter2secret@127.0.0.1:notaport/chat"},
			2, "database_url (from env CHAT_DATABASE_URL)"},
		{"pool size conflict", map[string]string{"CHAT_DATABASE_URL": "postgres://chat:hunter2secret@127.0.0.1:1/chat?pool_max_conns=50", "CHAT_DB_MAX_CONNS": "10"},
			2, "database_url (from env CHAT_DATABASE_URL)"},
		{"unreachable", map[string]string{"CHAT_DATABASE_URL": "postgres://chat:hunter2secret@127.0.0.1:1/chat?connect_timeout=2"},
			1, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			code, _, errOut := chatd(t, t.Context(), env)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want %d), stderr lacks %q:\n%s", code, tc.code, tc.want, errOut)
			}
			if strings.Contains(errOut, "hunter2secret") {
				t.Fatalf("the password is in the output:\n%s", errOut)
			}
		})
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 named cn.
func writeCert(t *testing.T, certPath, keyPath, cn string) {
	t.Helper()
	certPEM, keyPEM := testcert.SelfSigned(t, cn)
	testcert.WriteFiles(t, certPath, keyPath, certPEM, keyPEM)
}

func waitLog(t *testing.T, logs *logtest.Buffer, re *regexp.Regexp, what string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the log within 30s:\n%s", what, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
