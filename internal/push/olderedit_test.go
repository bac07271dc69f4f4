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
