// Package testkit holds the small helpers every test package would
// otherwise write again: polling a condition until it holds (or while it
// must not come to hold) or a channel to give something, picking a free loopback port, reading the live
// heap and checking that memory a burst took is given back, reading the
// process's CPU time (cpu_*.go), serving an
// identity provider's key set (jwks.go). It imports nothing of chatd, so any package's
// in-package tests can use it without an import cycle. Only tests import
// it.
package testkit

import (
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
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

// Receive waits up to d for a value from ch (or for ch to close) and
// returns it, failing the test with failure, and how long it waited, when
// nothing came.
func Receive[T any](t testing.TB, ch <-chan T, d time.Duration, failure string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s (waited %v)", failure, d)
		var zero T
		return zero
	}
}

// Never polls cond every 10 ms for d, giving what must not happen its
// chance to happen (a timer to fire, a stray delivery to arrive), and marks
// the test failed with "within <d>: <what>" the moment cond holds. The test
// goes on: what it checks next can tell more of what happened.
func Never(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			t.Errorf("within %v: %s", d, what)
			return
		}
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

// GivesBack runs grow, then release, and fails t unless what grow added
// to the live heap is down to at most 1/div of it once release has run;
// what names the thing grown in the messages.
func GivesBack(t testing.TB, what string, div int64, grow, release func()) {
	t.Helper()
	base := LiveHeap()
	grow()
	grown := LiveHeap() - base
	release()
	left := LiveHeap() - base
	t.Logf("heap: %d KiB for %s, %d KiB once released", grown>>10, what, left>>10)
	if left > grown/div {
		t.Fatalf("%d KiB of the %d KiB %s took is still held once released", left>>10, grown>>10, what)
	}
}

// FreeAddr returns a loopback host:port nobody listens on right now, below
// the kernel's ephemeral range. It is released before the caller binds it,
// often seconds later (a chatd starting its PostgreSQL first); a port from
// the ephemeral range (what port 0 gives) can meanwhile become the source
// port of any outgoing connection on the machine, and tests in parallel
// make thousands. Below the range only another listener can take it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		port := freeFloor + rand.IntN(low-freeFloor)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: another try
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatalf("find a free port: none free of 200 tried in %d-%d", freeFloor, low-1)
	return ""
}

// freeFloor is the lowest port FreeAddr picks: above the well-known and
// registered services a test machine may run, and above the ports the
// bench/ scripts use (21xxx-22xxx).
const freeFloor = 24000

// ephemeralLow is the first port of the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; 32768 where it cannot be read
// or leaves no room above freeFloor).
func ephemeralLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fallback
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= freeFloor+1000 {
		return fallback
	}
	return low
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

// Pending is an operation Start runs in a goroutine of its own.
type Pending[T any] struct {
	ch       chan pendingResult[T]
	returned bool
	res      pendingResult[T]
}

type pendingResult[T any] struct {
	v   T
	err error
}

// Start runs op in a goroutine of its own and waits up to 10 s until it
// has returned or parked() holds (it waits behind a lock the test holds):
// a race test lets either happen, since which one the code under test
// picks is its own business, and only checks the outcome.
func Start[T any](t testing.TB, what string, op func() (T, error), parked func() bool) *Pending[T] {
	t.Helper()
	p := &Pending[T]{ch: make(chan pendingResult[T], 1)}
	go func() {
		v, err := op()
		p.ch <- pendingResult[T]{v, err}
	}()
	WaitFor(t, 10*time.Second, what+" to return or wait", func() bool { return p.Returned() || parked() })
	return p
}

// Wait is op's result, once it has returned.
func (p *Pending[T]) Wait() (T, error) {
	if !p.returned {
		p.res = <-p.ch
		p.returned = true
	}
	return p.res.v, p.res.err
}

// Returned says whether op has returned by now.
func (p *Pending[T]) Returned() bool {
	if !p.returned {
		select {
		case p.res = <-p.ch:
			p.returned = true
		default:
		}
	}
	return p.returned
}
