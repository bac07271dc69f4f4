// Package testkit holds the small helpers every test package would
// otherwise write again: polling a condition until it holds, picking a
// free loopback port and reading the live heap. It imports nothing of chatd, so any package's
// in-package tests can use it without an import cycle. Only tests import
// it.
package testkit

import (
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms until it holds, failing the test with
// "timed out after <timeout> waiting for <what>" once timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LiveHeap is the bytes of heap objects still reachable after two
// collections (the first may leave objects that finalizers or the sweep
// free only by the second).
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// FreeAddr returns a loopback host:port nobody listens on right now. It is
// released before the caller binds it; on a test machine the window for a
// collision is negligible.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return n
}
