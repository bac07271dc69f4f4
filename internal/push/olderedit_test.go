package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
)

// TestAnEditOfAShownMessageUpdatesItWhenTheNewerPushClaimedMeanwhileIsSkipped:
// with previews, bob's devices show the notification of "zero"; the one
// of "one" is under its first claim when "zero" is edited and the edit
// decided (updateSQL follows the pair's newest claimed notification, the
// one of "one", which does not show "zero": no update). The claim is then
// skipped (not needed any more by the time it was to be sent): nothing of
// it reached a device, which still shows "zero" with its old text, as a
// recall's case keeps recalled_older for. Bob should get the update.
func TestAnEditOfAShownMessageUpdatesItWhenTheNewerPushClaimedMeanwhileIsSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Preview = true
	p, conv, zero, _, c := r.bobShownZeroAndClaimedOne()
	if got := r.waitPushes("bob", 1, 0); got[0].Body != "zero" {
		t.Fatalf("bob's first push = %+v, want the preview of zero", got[0])
	}
	r.edit(conv, 1, zero, "zero, fixed")
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if err := push.WriteResult(ctx, p, c, "skipped", 0); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	// Before: 'bob: 1 pushes after 3s, want 2' (no update ever owed).
	got := r.waitPushes("bob", 2, 3*time.Second)
	if n := got[1]; n.Type != push.TypeUpdate || n.Seq != zero || n.Body != "zero, fixed" {
		t.Errorf("bob's push after the edit = %+v, want an update of seq %d to %q", n, zero, "zero, fixed")
	}
}

// wantUpdateOfZeroThenOne asserts bob's second push is an update of
// "zero" (seq zero) to "zero, fixed", his third the notification of
// "one" (seq one), which waited for it, and that nothing more comes.
func wantUpdateOfZeroThenOne(r *rig, zero, one int64) {
	r.t.Helper()
	got := r.waitPushes("bob", 3, 5*time.Second)
	if n := got[1]; n.Type != push.TypeUpdate || n.Seq != zero || n.Body != "zero, fixed" {
		r.t.Errorf("bob's push after the edit = %+v, want an update of seq %d to %q", n, zero, "zero, fixed")
	}
	if n := got[2]; n.Type != push.TypeMessage || n.Seq != one || n.Body != "one" {
		r.t.Errorf("bob's push after the update = %+v, want the notification of seq %d", n, one)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 3, 500*time.Millisecond)
}

// TestAnEditOfAShownMessageUpdatesItWhenTheNewerPushClaimedMeanwhileIsHandedBack:
// with previews, bob's devices show the notification of "zero"; the one
// of "one" is under its first claim when "zero" is edited and the edit
// decided, and a stopping node then hands the claim back unsent. The
// devices still show "zero" with its old text: they get the update
// first, and then the notification of "one" (which replaces it).
func TestAnEditOfAShownMessageUpdatesItWhenTheNewerPushClaimedMeanwhileIsHandedBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Preview = true
	p, conv, zero, one, c := r.bobShownZeroAndClaimedOne()
	r.edit(conv, 1, zero, "zero, fixed")
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if err := push.WriteResult(ctx, p, c, "release", 0); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	wantUpdateOfZeroThenOne(r, zero, one)
}

// TestAnEditOfAShownMessageUpdatesItWhenTheNewerPushsLeaseRanOutUnsent:
// with previews, bob's devices show the notification of "zero"; the one
// of "one" was claimed into a node's queue, "zero" edited and the edit
// decided, and the claim's lease ran out there before any request of it
// went out. The next claim takes it back: the devices still show "zero"
// with its old text, and get the update first, then the notification of
// "one".
func TestAnEditOfAShownMessageUpdatesItWhenTheNewerPushsLeaseRanOutUnsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Preview = true
	p, conv, zero, one, _ := r.bobShownZeroAndClaimedOneFor(time.Second)
	r.edit(conv, 1, zero, "zero, fixed")
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND edited_older = $1 AND state = 'sending'`, zero); n != 1 {
		t.Fatalf("the edit of zero is kept with %d claims, want the one of one's notification\n%s", n, dumpJobs(r))
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
	r.start(nil)
	wantUpdateOfZeroThenOne(r, zero, one)
}

// TestAnEditOfAShownMessageSendsNoUpdateWhenTheNewerPushClaimedMeanwhileIsShown:
// the newer notification, of "one", reached bob's devices: it replaced
// "zero"'s there, which the update would change. Bob gets nothing more.
func TestAnEditOfAShownMessageSendsNoUpdateWhenTheNewerPushClaimedMeanwhileIsShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Preview = true
	p, conv, zero, _, c := r.bobShownZeroAndClaimedOne()
	r.edit(conv, 1, zero, "zero, fixed")
	if _, err := r.decide(ctx, p, conv); err != nil {
		t.Fatal(err)
	}
	if err := push.WriteResult(ctx, p, c, "shown", 0); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 500*time.Millisecond)
}
