package push_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/push"
)

// subscribeUnreachable registers a webpush device of user whose push
// service refuses connections (nothing listens at its address).
func (r *rig) subscribeUnreachable(user int64) {
	r.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, sub := r.ep.Subscribe("unreachable")
	if _, _, err := r.devices.RegisterDevice(context.Background(), user, chat.DeviceRequest{Platform: "webpush", Endpoint: "http://" + addr + "/push/unreachable",
		Keys: &chat.DeviceKeys{P256dh: sub.P256dh(), Auth: sub.AuthB64()}}, nil); err != nil {
		r.t.Fatal(err)
	}
}

// TestAPushThatReachedNoDeviceDoesNotHoldBackTheNextOne: bob's phone's
// push service refused the connection: his push is owed to it again (a
// counted retry), but it buzzed nothing, so the minimum interval does not
// count from it. The pair's next push goes once due (taking over the
// first's message), not MinInterval after the first push's claim.
func TestAPushThatReachedNoDeviceDoesNotHoldBackTheNextOne(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) {
		c.MinInterval, c.BackoffMin, c.BackoffMax = time.Minute, time.Minute, time.Minute
	})
	conv := r.direct(1, 2)
	r.subscribeUnreachable(2)
	r.send(conv, 1, "one")
	r.waitCount(1, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND attempts = 1 AND lease_until IS NULL AND device_ids IS NOT NULL`)
	two := r.send(conv, 1, "two")
	r.waitCount(1, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND seq = $1 AND attempts >= 1`, two)
}

// TestARetryThatReachesADeviceHoldsTheMinimumInterval: bob's push first
// reached no device (the phone's push service answered 503), then its
// retry reached the phone: that was a push, and the pair's next one waits
// MinInterval after it.
func TestARetryThatReachesADeviceHoldsTheMinimumInterval(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) { c.MinInterval = time.Minute })
	conv := r.direct(1, 2)
	r.subscribe(2, "phone")
	r.ep.Script("phone", http.StatusServiceUnavailable)
	r.send(conv, 1, "one")
	r.waitPushes("phone", 1, 5*time.Second)
	two := r.send(conv, 1, "two")
	r.waitCount(1, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND seq = $1`, two)
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND seq = $1 AND state = 'pending' AND not_before > now() + interval '30 seconds'`, two); n != 1 {
		t.Fatalf("bob's next push after the retry reached his phone: %d waiting for the minimum interval, want 1\n%s", n, dumpJobs(r))
	}
}
