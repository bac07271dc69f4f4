package push_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestARecallOfAMessageWhosePushsLeaseRanOutUnsentSendsNoRemove: bob's
// notification was claimed into a node's queue, and its lease ran out
// there before any request of it went out (the node's workers were busy;
// its recheck finds the lease gone and drops it). Its message is
// recalled: nothing of it reached bob's devices, so the node that claims
// it next sends bob nothing, neither the notification nor a remove.
func TestARecallOfAMessageWhosePushsLeaseRanOutUnsentSendsNoRemove(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	_, conv, seq, _ := r.bobsClaimedPush("hi bob", 100*time.Millisecond)
	r.recall(conv, 1, seq)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 0, 500*time.Millisecond)
}

// TestAPushWhoseLeaseRanOutUnsentDoesNotHoldBackTheNextOne: bob's
// notification was claimed into a node's queue and its lease ran out there
// unsent; bob's app acknowledged the message meanwhile, so the next claim
// sends nothing. Nothing buzzed: the pair's next push is not held back by
// the minimum interval counted from that first claim.
func TestAPushWhoseLeaseRanOutUnsentDoesNotHoldBackTheNextOne(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.cfg.Delay, r.cfg.MinInterval = time.Millisecond, 20*time.Second
	_, conv, one, _ := r.bobsClaimedPush("one", 100*time.Millisecond)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
	r.ack(conv, 2, one)
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if len(r.ep.Of("bob")) != 0 {
		t.Fatal("bob's acknowledged message was pushed")
	}
	two := r.send(conv, 1, "two")
	got := r.waitPushes("bob", 1, 5*time.Second)
	if got[0].Seq != two || got[0].Count != 1 {
		t.Errorf("bob's push = %+v, want the notification of seq %d alone", got[0], two)
	}
}

// TestAPushWhoseSendAStoppingNodeCutBeforeAnyRequestWentOutWaitsAgain:
// bob's notification was being sent (its push service not even connected
// to yet) when the node stopped: no request of it went out. It is handed
// back as a queued one is: it waits again, and a recall of its message
// sends bob nothing, neither the notification nor a remove.
func TestAPushWhoseSendAStoppingNodeCutBeforeAnyRequestWentOutWaitsAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dialing := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var once sync.Once
	// A push service whose connection never opens: the request waits to
	// be written until the stop cancels it.
	never := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		once.Do(func() { close(dialing) })
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return nil, net.ErrClosed
		}
	}}}
	stop := r.start(func(c *push.Config) { c.HTTPClient, c.Workers = never, 1 })
	r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "hi bob")
	select {
	case <-dialing:
	case <-time.After(5 * time.Second):
		t.Fatal("bob's push was not sent")
	}
	stop()
	var state string
	var attempts int
	if err := r.pool.QueryRow(context.Background(), `SELECT state, attempts FROM push_job WHERE user_id = 2`).Scan(&state, &attempts); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || attempts != 0 {
		t.Errorf("bob's push after the node stopped: %s, attempts %d; want it waiting again (pending, 0)\n%s", state, attempts, dumpJobs(r))
	}
	r.recall(conv, 1, seq)
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 0, 500*time.Millisecond)
}

// TestARecallOfAShownMessageRemovesItWhenTheNewerPushThatTookOverTheRetriedOneReachesNoDevice:
// bob's devices show the notification of "zero". The one of "one" was
// claimed, "zero" recalled meanwhile (the remove is owed should that claim
// reach no device), and its send reached none: it waits for a retry. The
// notification of "two" takes it over when claimed, and is then skipped:
// bob's devices still show "zero", recalled. They get a remove of "zero".
func TestARecallOfAShownMessageRemovesItWhenTheNewerPushThatTookOverTheRetriedOneReachesNoDevice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	p, conv, zero, _, c := r.bobShownZeroAndClaimedOne()
	dev := r.count(`SELECT id FROM push_device WHERE user_id = 2`)
	r.recall(conv, 1, zero)
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if err := push.MarkStarted(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if err := push.WriteResult(ctx, p, c, "retry", dev); err != nil {
		t.Fatal(err)
	}
	r.send(conv, 1, "two")
	r.decideAll(p, []int64{conv}, 3)
	var two []push.Claim
	testkit.WaitFor(t, 5*time.Second, "the notification of two claimed", func() bool {
		two = r.claims(p, 10, time.Minute)
		return len(two) == 1
	})
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND kind = 'message' AND state = 'sending'`); n != 1 {
		t.Fatalf("%d of bob's notifications claimed, want the one of two, which took over the one of one\n%s", n, dumpJobs(r))
	}
	if err := push.WriteResult(ctx, p, two[0], "skipped", 0); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	wantRemoveOf(r, zero)
}
