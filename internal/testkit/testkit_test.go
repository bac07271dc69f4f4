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

func (f *failures) Fatalf(format string, args ...any) { f.Errorf(format, args...) }

func TestReceiveGivesWhatTheChannelSentAndNamesTheWaitWhenNothingCame(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	var sent failures
	if got := Receive(&sent, ch, time.Second, "no seven"); got != 7 || len(sent.got) != 0 {
		t.Fatalf("Receive of a sent 7: %d, failures %q", got, sent.got)
	}
	var silent failures
	Receive(&silent, ch, 20*time.Millisecond, "the push never reached the webhook")
	if want := "the push never reached the webhook (waited 20ms)"; len(silent.got) != 1 || silent.got[0] != want {
		t.Fatalf("Receive from a silent channel reported %q, want [%q]", silent.got, want)
	}
	done := make(chan struct{})
	close(done)
	var closed failures
	Receive(&closed, done, time.Second, "not closed")
	if len(closed.got) != 0 {
		t.Fatalf("Receive from a closed channel failed: %q", closed.got)
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
