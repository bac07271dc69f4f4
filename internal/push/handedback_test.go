package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestARecallOfAMessageWhosePushWasHandedBackUnsentSendsNoRemove: bob's
// notification was claimed into a node's queue and handed back unsent when
// the node stopped: it never reached his devices. Its message is recalled
// before the next node starts: bob gets nothing, neither the notification
// (all it stood for was recalled) nor a remove (nothing of it is on his
// devices to take away).
func TestARecallOfAMessageWhosePushWasHandedBackUnsentSendsNoRemove(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stop := r.start(func(c *push.Config) { c.Workers, c.Timeout = 1, 5*time.Second })
	conv := r.queuedBehindAHang()
	stop()
	r.waitCount(1, time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND attempts = 0 AND lease_until IS NULL`)
	if len(r.ep.Of("bob")) != 0 {
		t.Fatal("bob's push was sent before the node stopped: nothing was handed back")
	}
	rec := r.recall(conv, 1, r.count(`SELECT max(seq) FROM message WHERE conversation_id = $1 AND kind = 'message'`, conv))
	// The recall is decided before a node claims the notification again
	// (a claim first would find nothing left to send, and delete it).
	p := r.pusher()
	if _, err := r.decide(context.Background(), p, conv); err != nil {
		t.Fatal(err)
	}
	r.waitCount(rec, 0, `SELECT COALESCE((SELECT seq FROM push_cursor WHERE conversation_id = $1), 0)`, conv)
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 0, 500*time.Millisecond)
}

// TestARecallOfAMessageWhosePushsSendOutcomeIsUnknownRemovesIt: a node
// claimed bob's notification, started its send and died before it
// recorded what the send did (its lease ran out): the notification may be
// on his devices. Its message is recalled: bob's devices get the remove,
// and then nothing (the notification stood for that message alone).
func TestARecallOfAMessageWhosePushsSendOutcomeIsUnknownRemovesIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	p, conv, seq, c := r.bobsClaimedPush("hi bob", time.Second)
	if err := push.MarkStarted(context.Background(), p, c); err != nil {
		t.Fatal(err)
	}
	r.recall(conv, 1, seq)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
	r.start(nil)
	got := r.waitPushes("bob", 1, 5*time.Second)
	if n := got[0]; n.Type != push.TypeRemove || len(n.Seqs) != 1 || n.Seqs[0] != seq {
		t.Errorf("bob's push after the recall = %+v, want a remove of seq %d", n, seq)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 500*time.Millisecond)
}

// TestANotificationHandedBackUnsentWaitsWithTheOneThatCameMeanwhile: bob's
// notification of "one" was claimed, the one of "two" came to wait behind
// it, and a stopping node handed the claim back unsent. They wait as one
// (a pair has one waiting notification): "one" recalled, no remove is
// sent (nothing was on bob's devices), and bob gets the notification of
// "two", counting it alone.
func TestANotificationHandedBackUnsentWaitsWithTheOneThatCameMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Delay = time.Millisecond
	p, conv, one, c := r.bobsClaimedPush("one", time.Minute)
	two := r.send(conv, 1, "two")
	r.decideAll(p, []int64{conv}, 2)
	if err := push.WriteResult(ctx, p, c, "release", 0); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'pending'`); n != 1 {
		t.Errorf("%d of bob's notifications wait after the hand-back, want 1\n%s", n, dumpJobs(r))
	}
	r.recall(conv, 1, one)
	// Decided before a node claims either of them.
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	got := r.waitPushes("bob", 1, 5*time.Second)
	if n := got[0]; n.Type != push.TypeMessage || n.Seq != two || n.Count != 1 {
		t.Errorf("bob's push = %+v, want the notification of seq %d counting it alone", n, two)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 500*time.Millisecond)
}

// bobsClaimedPush has user 1 send body to bob (user 2, one device) in a
// direct conversation and a node claim bob's push for lease; it returns
// that node's pusher, the conversation, the message's seq and the claim.
func (r *rig) bobsClaimedPush(body string, lease time.Duration) (*push.Pusher, int64, int64, push.Claim) {
	r.t.Helper()
	r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, body)
	p := r.pusher()
	return p, conv, seq, r.claimBobs(p, conv, lease)
}

// TestARecallDecidedBeforeItsPushIsHandedBackUnsentSendsNoRemove: bob's
// devices show the notification of "zero". The one of "one" is claimed,
// "one" is recalled and the recall decided while the claim holds it (the
// claimed notification is the pair's newest: a remove is owed for it),
// and then a stopping node hands the claim back unsent. Nothing of "one"
// reached bob's devices: they get no remove, which would take "zero"'s
// notification off them.
func TestARecallDecidedBeforeItsPushIsHandedBackUnsentSendsNoRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	p, conv, _, one, c := r.bobShownZeroAndClaimedOne()
	r.recall(conv, 1, one)
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if err := push.WriteResult(ctx, p, c, "release", 0); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 500*time.Millisecond)
}

// bobShownZeroAndClaimedOne has user 1 send "zero" to bob (user 2, one
// device) in a direct conversation, a node push it to his device and
// stop, then send "one", whose notification another node claims (its
// first claim, for a minute). It returns that node's pusher, the
// conversation, the seqs of "zero" and "one", and the claim.
func (r *rig) bobShownZeroAndClaimedOne() (*push.Pusher, int64, int64, int64, push.Claim) {
	r.t.Helper()
	return r.bobShownZeroAndClaimedOneFor(time.Minute)
}

// bobShownZeroAndClaimedOneFor is bobShownZeroAndClaimedOne with the
// claim of "one"'s notification made for lease.
func (r *rig) bobShownZeroAndClaimedOneFor(lease time.Duration) (*push.Pusher, int64, int64, int64, push.Claim) {
	t := r.t
	t.Helper()
	r.cfg.Delay = time.Millisecond
	r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	zero := r.send(conv, 1, "zero")
	// r.cfg's registry, if any, is the claiming node's (a registry takes
	// one node's metrics).
	stop := r.start(func(c *push.Config) { c.Registerer = nil })
	r.waitPushes("bob", 1, 5*time.Second)
	r.waitCount(1, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sent'`)
	stop()

	one := r.send(conv, 1, "one")
	p := r.pusher()
	r.decideAll(p, []int64{conv}, 2)
	var cs []push.Claim
	testkit.WaitFor(t, 5*time.Second, "the notification of one claimed", func() bool {
		cs = r.claims(p, 10, lease)
		return len(cs) == 1
	})
	return p, conv, zero, one, cs[0]
}
