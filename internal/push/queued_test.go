package push_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAPushWaitingInTheQueueIsCheckedAgainBeforeItIsSent: one worker is
// held by a push service that hangs, so bob's push, claimed meanwhile,
// waits in the node's memory; what happens to it there counts as it does
// before the claim: his message recalled, read by him, its sender blocked
// or the conversation muted by him, him gone from the group, or his
// device handed to another user: nothing of it reaches the device.
func TestAPushWaitingInTheQueueIsCheckedAgainBeforeItIsSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		act  func(r *rig, g, seq int64, bob chat.DeviceRequest)
	}{
		{"recalled", func(r *rig, g, seq int64, _ chat.DeviceRequest) { r.recall(g, 1, seq) }},
		{"read", func(r *rig, g, seq int64, _ chat.DeviceRequest) {
			if _, err := r.store.MarkRead(ctx, g, 2, seq); err != nil {
				r.t.Fatal(err)
			}
		}},
		{"acknowledged", func(r *rig, g, seq int64, _ chat.DeviceRequest) { r.ack(g, 2, seq) }},
		{"sender blocked", func(r *rig, _, _ int64, _ chat.DeviceRequest) {
			if err := r.store.Block(ctx, 2, 1, 100); err != nil {
				r.t.Fatal(err)
			}
		}},
		{"muted", func(r *rig, g, _ int64, _ chat.DeviceRequest) {
			r.settings(g, 2, chat.ConversationSettings{Muted: true})
		}},
		{"left", func(r *rig, g, _ int64, _ chat.DeviceRequest) {
			if err := r.store.RemoveMember(ctx, g, 2, 2); err != nil {
				r.t.Fatal(err)
			}
		}},
		{"device now another user's", func(r *rig, _, _ int64, bob chat.DeviceRequest) {
			// The browser bob used is dave's now (the same subscription).
			if _, _, err := r.devices.RegisterDevice(ctx, 4, bob, nil); err != nil {
				r.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.start(func(c *push.Config) { c.Preview, c.Workers = true, 1 })
			// Carol's push holds the one worker for the timeout (2 s).
			r.subscribe(3, "carol")
			r.ep.Hang("carol", true)
			r.send(r.direct(1, 3), 1, "hi carol")
			deadline := time.Now().Add(3 * time.Second)
			for len(r.ep.Pushes()) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("carol's push did not reach the endpoint")
				}
				time.Sleep(10 * time.Millisecond)
			}
			g := r.group(1, 2, 3)
			url, sub := r.ep.Subscribe("bob")
			bob := chat.DeviceRequest{Platform: "webpush", Endpoint: url, Keys: &chat.DeviceKeys{P256dh: sub.P256dh(), Auth: sub.AuthB64()}}
			if _, _, err := r.devices.RegisterDevice(ctx, 2, bob, nil); err != nil {
				t.Fatal(err)
			}
			seq := r.send(g, 1, "secret for bob")
			// Claimed into the queue behind carol's.
			r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sending'`)
			if len(r.ep.Of("bob")) != 0 {
				t.Fatal("bob's push was sent before carol's ended: no queue to wait in")
			}
			tc.act(r, g, seq, bob)
			r.quiet("bob", 0, 3*time.Second) // past carol's timeout
			for _, p := range r.ep.Pushes() {
				if p.Path == "/push/bob" && strings.Contains(string(p.Plaintext), "secret") {
					t.Errorf("bob's device got %s", p.Plaintext)
				}
			}
		})
	}
}

// TestAPushThatOutlivesItsLeaseInTheQueueIsSentOnce: push services that
// hang keep the one worker busy past the lease of the push queued behind
// them; that push is claimed again (by this node, or another), and the
// copy still in the queue must not be sent as well.
func TestAPushThatOutlivesItsLeaseInTheQueueIsSentOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// Lease: 3 × 1 s + 5 s = 8 s; the eleven hanging pushes ahead take 11 s.
	r.start(func(c *push.Config) { c.Workers, c.Timeout = 1, time.Second })
	var hung []int64
	for u := int64(10); u < 21; u++ {
		r.subscribe(u, fmt.Sprintf("hung%d", u))
		r.ep.Hang(fmt.Sprintf("hung%d", u), true)
		hung = append(hung, u)
	}
	r.send(r.group(1, hung...), 1, "to the hanging ones")
	r.waitCount(int64(len(hung)), 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sending'`)
	r.subscribe(2, "bob")
	r.send(r.direct(1, 2), 1, "hi bob")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sending'`)
	// Bob's turn comes once the worker has got through the hanging
	// pushes queued before his claim and its re-claim, retries of the
	// first of them included: about 11 s on a quiet machine, and several
	// times the 1 s timeout more when the machine is loaded.
	r.waitPushes("bob", 1, 45*time.Second)
	// The hanging ones answer now: whatever is queued goes at once.
	for _, u := range hung {
		r.ep.Hang(fmt.Sprintf("hung%d", u), false)
	}
	r.quiet("bob", 1, 3*time.Second)
}

// TestAStoppingNodeHandsBackOnlyTheClaimsItStillHolds: a push waited in a
// node's queue past its lease (push services that hang kept the one
// worker busy) and another node claimed it again; when the first node
// stops, it hands its queued claims back, and must leave that one alone:
// clearing the other node's lease would let a third claim send it twice.
func TestAStoppingNodeHandsBackOnlyTheClaimsItStillHolds(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stop := r.start(func(c *push.Config) { c.Workers, c.Timeout = 1, 5*time.Second })
	r.queuedBehindAHang()
	// Its lease ran out and another node claimed it, as the claim does.
	if _, err := r.pool.Exec(context.Background(), `UPDATE push_job SET attempts = attempts + 1, claims = claims + 1, lease_until = now() + interval '1 minute'
WHERE user_id = 2`); err != nil {
		t.Fatal(err)
	}
	stop()
	var attempts int
	var leased bool
	if err := r.pool.QueryRow(context.Background(), `SELECT attempts, lease_until IS NOT NULL AND lease_until > now() FROM push_job WHERE user_id = 2`).Scan(&attempts, &leased); err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || !leased {
		t.Fatalf("bob's push after the node stopped: attempts %d, leased %v; want the other node's claim (2, true)", attempts, leased)
	}
	r.quiet("bob", 0, 0)
}

// TestAPushHandedBackByAStoppingNodeDoesNotHoldBackTheNextOne: bob's push
// was claimed into a node's queue and handed back unsent when the node
// stopped: that was no push. A message bob got while no node ran is not
// held back by the minimum interval counted from that claim: the node
// that starts next decides it (before its first claim) and sends both
// at once.
func TestAPushHandedBackByAStoppingNodeDoesNotHoldBackTheNextOne(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stop := r.start(func(c *push.Config) { c.Workers, c.Timeout, c.MinInterval = 1, 5*time.Second, 10*time.Second })
	conv := r.queuedBehindAHang()
	stop()
	r.waitCount(1, time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'pending' AND attempts = 0 AND lease_until IS NULL`)
	if len(r.ep.Of("bob")) != 0 {
		t.Fatal("bob's push was sent before the node stopped: nothing was handed back")
	}
	seq := r.send(conv, 1, "are you there?")
	// Due (push_delay) by the time the next node decides.
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM message WHERE conversation_id = $1 AND seq = $2
AND created_at <= now() - interval '400 milliseconds'`, conv, seq)
	// Its first claim comes after its first decision (which wakes it),
	// not at its first tick.
	r.start(func(c *push.Config) { c.Timeout, c.MinInterval, c.Tick = 5*time.Second, 10*time.Second, 2*time.Second })
	got := r.waitPushes("bob", 1, 3*time.Second)
	if got[0].Seq != seq || got[0].Count != 2 {
		t.Errorf("bob's push = %+v, want both messages, the newest %d", got[0], seq)
	}
}

// TestAStoppingNodeHandsBackAClaimItWasReadingAgain: bob's push waited in
// the queue and was being read again (recheck) when the node stopped:
// stopping cancels that read, and the claim is handed back like the ones
// still queued, not left to wait out its lease.
func TestAStoppingNodeHandsBackAClaimItWasReadingAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	// The hanging push's retry is not due while the test runs: no claim
	// reads the devices.
	stop := r.start(func(c *push.Config) { c.Workers, c.Timeout, c.BackoffMin = 1, time.Second, time.Minute })
	r.queuedBehindAHang()
	// The test holds the devices, so reading bob's push again (which
	// reads them) waits once the worker is free, and handing it back
	// (which does not) need not.
	hold, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `LOCK TABLE push_device IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the worker reading bob's push again", func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
	stop()
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var attempts int
	var leased bool
	if err := r.pool.QueryRow(ctx, `SELECT attempts, lease_until IS NOT NULL AND lease_until > now() FROM push_job WHERE user_id = 2`).Scan(&attempts, &leased); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || leased {
		t.Fatalf("bob's push after the node stopped: attempts %d, leased %v; want it handed back (0, false)", attempts, leased)
	}
	if len(r.ep.Of("bob")) != 0 {
		t.Fatal("bob's push was sent by the stopping node")
	}
}

// queuedBehindAHang has the node's one worker stuck on user 10's push
// (their push service hangs) and waits until bob's (user 2's) push, for
// a message from user 1 in the conversation it returns, is claimed into
// the queue behind it.
func (r *rig) queuedBehindAHang() (conv int64) {
	r.t.Helper()
	r.subscribe(10, "hung")
	r.ep.Hang("hung", true)
	r.send(r.direct(1, 10), 1, "to the one whose push service hangs")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 10 AND state = 'sending'`)
	r.subscribe(2, "bob")
	conv = r.direct(1, 2)
	r.send(conv, 1, "hi bob")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sending' AND attempts = 1`)
	return conv
}
