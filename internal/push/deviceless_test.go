package push_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/push"
)

// decisions is how many decision transactions the pusher registered on reg
// committed (chat_push_decide_seconds' count).
func decisions(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "chat_push_decide_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// With no device registered anywhere, no decision can push: the decider
// passes the conversations over once a second, in one transaction for all
// that fell due, not once a tick for each tick's worth (each a write the
// send path's commits share the WAL flushes with). Their cursors still
// reach their last seq.
func TestWithNoDeviceAnywhereTheDeciderPassesOverOnceASecond(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	reg := prometheus.NewRegistry()
	r.start(func(c *push.Config) { c.Delay, c.Registerer = 10*time.Millisecond, reg })
	conv := r.direct(1, 2)
	start := time.Now()
	var last int64
	for i := range 30 {
		last = r.send(conv, 1+int64(i%2), fmt.Sprint("hello ", i))
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	deadline := time.Now().Add(5 * time.Second)
	for r.count(`SELECT coalesce(max(seq), 0) FROM push_cursor WHERE conversation_id = $1`, conv) != last {
		if time.Now().After(deadline) {
			t.Fatalf("push cursor at %d, want %d", r.count(`SELECT coalesce(max(seq), 0) FROM push_cursor WHERE conversation_id = $1`, conv), last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// One a second over the sends, the first at once, one for the last
	// messages after them; a decision a tick would be about one a send.
	if n, most := decisions(t, reg), uint64(elapsed/time.Second)+3; n > most {
		t.Errorf("%d decision transactions for 30 messages over %v, want at most %d", n, elapsed.Round(time.Millisecond), most)
	}
}

// The first device registered after the decider held device-less
// conversations back is seen at once: its user's next message is decided
// as before and pushes.
func TestAFirstDeviceRegisteredAfterDevicelessPassesGetsPushes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(nil)
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "before any device")
	deadline := time.Now().Add(5 * time.Second)
	for r.count(`SELECT coalesce(max(seq), 0) FROM push_cursor WHERE conversation_id = $1`, conv) != seq {
		if time.Now().After(deadline) {
			t.Fatal("the conversation without devices was not passed over")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.subscribe(2, "bob")
	r.send(conv, 1, "after the device")
	got := r.waitPushes("bob", 1, 5*time.Second)
	if len(got) != 1 || got[0].Count != 1 {
		t.Errorf("pushes = %+v, want one for the message after the device", got)
	}
	r.quiet("bob", 1, 500*time.Millisecond)
}
