package mqtttest

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// A client made its Publishes channel 100,000 packets long, 800 bytes
// each: 80 MB allocated at every connect, for tests that start dozens of
// clients on a shared machine.
func TestAClientAllocatesLittleAtItsConnect(t *testing.T) {
	addr := PlainBroker(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, _, err := Dial(addr, Options{Version: 5, ClientID: "small", Clean: true})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Drop()
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("a connect allocated %d MiB", n>>20)
	}
}

// A client whose test does not take its publishes for a while reads on
// and keeps every one, in order, beyond what Publishes holds; once its
// connection ends, Publishes closes after the last of them.
func TestAClientKeepsEveryPublishInOrderBeyondItsChannel(t *testing.T) {
	addr := PlainBroker(t)
	sub, _, err := Dial(addr, Options{Version: 5, ClientID: "sub", Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Drop()
	if codes, err := sub.Subscribe("t/#"); err != nil || codes[0] > 1 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	pub, _, err := Dial(addr, Options{Version: 5, ClientID: "pub", Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Drop()
	const n = 4 * DefaultReadBuffer
	for i := range n {
		if _, err := pub.Publish("t/x", 1, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Every publish read, none taken yet: the read loop did not wait.
	deadline := time.Now().Add(20 * time.Second)
	for {
		sub.qmu.Lock()
		waiting := len(sub.overflow)
		sub.qmu.Unlock()
		if len(sub.Publishes)+waiting == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d publishes read while the test took none", len(sub.Publishes)+waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sub.Drop()
	i := 0
	for pk := range sub.Publishes {
		if got := string(pk.Payload); got != strconv.Itoa(i) {
			t.Fatalf("publish %d is %q", i, got)
		}
		i++
	}
	if i != n {
		t.Fatalf("%d publishes, want %d", i, n)
	}
}
