//go:build unix

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
)

// The embedded PostgreSQL's postmaster dying under a running chatd (the
// OOM killer, a stray kill) used to leave chatd up for good: /healthz
// stayed 200 by design and nothing started PostgreSQL again, so no
// supervisor restarted the node and it answered 503 forever. chatd now
// stops (exit status 1) and its next start runs PostgreSQL's crash
// recovery.
func TestChatdExitsWhenItsEmbeddedPostgreSQLDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	base, err := os.MkdirTemp("", "chatd-pgexit")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(base, 0o755) // PostgreSQL runs unprivileged under root
	t.Cleanup(func() { os.RemoveAll(base) })
	dataDir := filepath.Join(base, "data")
	env := map[string]string{
		"CHAT_DATA_DIR": dataDir, "CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "127.0.0.1:0",
		"CHAT_SHUTDOWN_TIMEOUT": "5s",
	}
	c := startChatd(t, env)
	logs, done := c.logs, c.done
	waitLog(t, logs, regexp.MustCompile(`msg="chatd ready"`), "ready line")

	raw, err := os.ReadFile(filepath.Join(pgembed.PGDir(dataDir), "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := pgembed.ParsePostmasterPID(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pm.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("chatd exited %d after its PostgreSQL died, want 1", code)
		}
		if !strings.Contains(logs.String(), "PostgreSQL") || !strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("no ERROR line saying PostgreSQL died:\n%s", logs.String())
		}
	case <-time.After(30 * time.Second):
		c.cancel()
		<-done
		t.Fatalf("chatd still running 30 s after its embedded PostgreSQL (pid %d) was killed", pm.PID)
	}
}
