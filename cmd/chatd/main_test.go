package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/pgtest"
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
	code = run(ctx, args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
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
