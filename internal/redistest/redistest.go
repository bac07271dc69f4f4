// Package redistest runs a throwaway redis-server for tests of what chatd
// shares through Redis (the rate limits). Of chatd it imports only the
// test helpers logtest and testkit, so in-package tests can use it. Only
// tests import it.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/testkit"
)

// Start runs redis-server on a free loopback port (see StartOn).
func Start(t testing.TB) (url string, stop func()) {
	t.Helper()
	return StartOn(t, testkit.FreePort(t))
}

// StartOn runs redis-server on the loopback port in a temp dir, without
// persistence, and waits until it answers PING. It returns the server's
// URL and a stop that kills it (idempotent, also run at the end of the
// test). It skips the test when redis-server is missing, unless CI=true.
func StartOn(t testing.TB, port int) (url string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (apt-get install redis-server); CI must run the Redis tests")
		}
		t.Skip("SKIPPING: redis-server is not installed (apt-get install redis-server)")
	}
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	var out logtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) }
	t.Cleanup(stop)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for !pong(addr) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "redis://" + addr + "/0", stop
}

// pong is whether the server at addr answers PING.
func pong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	fmt.Fprintf(c, "PING\r\n")
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "+PONG")
}
