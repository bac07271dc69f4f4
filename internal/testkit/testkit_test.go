package testkit

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"
)

// failures is a testing.TB that records what Errorf is given.
type failures struct {
	testing.TB
	got []string
}

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, args ...any) {
	f.got = append(f.got, fmt.Sprintf(format, args...))
}

func TestNeverFailsOnceTheConditionComesToHoldAndNotBefore(t *testing.T) {
	var quiet failures
	Never(&quiet, 50*time.Millisecond, "a stray delivery", func() bool { return false })
	if len(quiet.got) != 0 {
		t.Fatalf("Never failed though the condition never held: %q", quiet.got)
	}
	polls := 0
	var late failures
	start := time.Now()
	Never(&late, 10*time.Second, "a stray delivery", func() bool { polls++; return polls == 3 })
	if want := "within 10s: a stray delivery"; len(late.got) != 1 || late.got[0] != want {
		t.Fatalf("Never reported %q once the condition held, want [%q]", late.got, want)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Never watched on for %v after the condition held", waited)
	}
}

func TestFreeAddrIsBelowTheEphemeralRangeOutgoingConnectionsUse(t *testing.T) {
	low := ephemeralLow()
	for range 50 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < freeFloor || port >= low {
			t.Fatalf("FreeAddr gave %s: outside %d-%d, where an outgoing connection may take it before the test binds it", addr, freeFloor, low-1)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr gave %s, which cannot be bound: %v", addr, err)
		}
		ln.Close()
	}
}
