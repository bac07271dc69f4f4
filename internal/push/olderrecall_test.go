package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
)

// zeroRecalledWhileOneIsClaimed: bob's devices show the notification of
// "zero"; the one of "one" is under its first claim when "zero" is
// recalled, and the recall decided (the claimed notification is the
// pair's newest, and does not stand for "zero"). outcome is then written
// for the claim. It returns the conversation and the seqs of "zero" and
// "one".
func zeroRecalledWhileOneIsClaimed(t *testing.T, r *rig, outcome string) (int64, int64, int64) {
	t.Helper()
	ctx := context.Background()
	p, conv, zero, one, c := r.bobShownZeroAndClaimedOne()
	r.recall(conv, 1, zero)
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if err := push.WriteResult(ctx, p, c, outcome, 0); err != nil {
		t.Fatal(err)
	}
	return conv, zero, one
}

// wantRemoveOf asserts bob's second push is a remove of seq alone, and
// that nothing more comes.
func wantRemoveOf(r *rig, seq int64) {
	r.t.Helper()
	got := r.waitPushes("bob", 2, 5*time.Second)
	if n := got[1]; n.Type != push.TypeRemove || len(n.Seqs) != 1 || n.Seqs[0] != seq {
		r.t.Errorf("bob's push after the recall = %+v, want a remove of seq %d", n, seq)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 2, 500*time.Millisecond)
}

// TestARecallOfAShownMessageRemovesItWhenTheNewerPushClaimedMeanwhileIsHandedBackAndDropped:
// the newer notification, of "one", is handed back unsent by a stopping
// node, and "one" is recalled too before a node claims it again: it is
// never sent, and bob's devices still show "zero", recalled. They get a
// remove of "zero".
func TestARecallOfAShownMessageRemovesItWhenTheNewerPushClaimedMeanwhileIsHandedBackAndDropped(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	conv, zero, one := zeroRecalledWhileOneIsClaimed(t, r, "release")
	r.recall(conv, 1, one)
	r.start(nil)
	wantRemoveOf(r, zero)
}

// TestARecallOfAShownMessageRemovesItWhenTheNewerPushClaimedMeanwhileIsSkipped:
// the newer notification, of "one", is skipped (not needed any more by
// the time it was to be sent): bob's devices still show "zero",
// recalled. They get a remove of "zero".
func TestARecallOfAShownMessageRemovesItWhenTheNewerPushClaimedMeanwhileIsSkipped(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	_, zero, _ := zeroRecalledWhileOneIsClaimed(t, r, "skipped")
	r.start(nil)
	wantRemoveOf(r, zero)
}

// TestARecallOfAShownMessageSendsNoRemoveWhenTheNewerPushClaimedMeanwhileIsShown:
// the newer notification, of "one", reached bob's devices: it replaced
// "zero"'s there, and a remove would take it off them. Bob gets nothing
// more.
func TestARecallOfAShownMessageSendsNoRemoveWhenTheNewerPushClaimedMeanwhileIsShown(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	zeroRecalledWhileOneIsClaimed(t, r, "shown")
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 500*time.Millisecond)
}
