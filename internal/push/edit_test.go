package push_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAnEditOfAPreviewedMessageReplacesTheTextOnTheDevices: with
// previews, a push showing "secret" was sent; the message is edited to
// "oops": the device gets a silent update of that notification carrying
// "oops" (no Topic), and no push after it shows "secret". An edit of an
// older message, which the notification does not show, sends nothing.
func TestAnEditOfAPreviewedMessageReplacesTheTextOnTheDevices(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Preview = true })
	older := r.send(conv, 1, "older")
	seq := r.send(conv, 1, "secret")
	if got := r.waitPushes("bob", 1, 3*time.Second); got[0].Body != "secret" || got[0].Seq != seq {
		t.Fatalf("push = %+v, want the preview of %q", got[0], "secret")
	}
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
	r.edit(conv, 1, seq, "oops")
	got := r.waitPushes("bob", 2, 3*time.Second)
	if n := got[1]; n.Type != push.TypeUpdate || n.ConversationID != conv || n.Seq != seq || n.Body != "oops" || n.UserID != 2 || n.Count != 0 || n.Title != "" {
		t.Errorf("push after the edit = %+v, want a silent update of seq %d to %q", n, seq, "oops")
	}
	if ps := r.ep.Of("bob"); ps[1].Header.Get("Topic") != "" {
		t.Errorf("update's Topic %q, want none (it would replace the notification held for an offline device)", ps[1].Header.Get("Topic"))
	}
	ed := r.edit(conv, 1, older, "older, fixed")
	r.waitCount(ed, 3*time.Second, `SELECT COALESCE((SELECT seq FROM push_cursor WHERE conversation_id = $1), 0)`, conv)
	r.quiet("bob", 2, 800*time.Millisecond)
	got = r.waitPushes("bob", 2, 0)
	if last := got[len(got)-1]; last.Body != "oops" {
		t.Errorf("the device's last push shows %q, want %q", last.Body, "oops")
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE kind <> 'message'`); n != 0 {
		t.Errorf("%d update jobs left:\n%s", n, dumpJobs(r))
	}
}

// TestAnUpdateLeavesTheNotificationAPushServiceHoldsForAnOfflineDevice:
// bob's browser is offline when a previewed message is pushed and then
// edited; the push service holds both pushes until it is back. The update
// must not take the notification's place there (a Topic of its own or
// none): the device gets the notification, so it learns that the message
// came, and the update.
func TestAnUpdateLeavesTheNotificationAPushServiceHoldsForAnOfflineDevice(t *testing.T) {
	t.Parallel()
	r, conv, seq := previewShownToBob(t, "secret")
	r.edit(conv, 1, seq, "oops")
	r.waitPushes("bob", 2, 3*time.Second)
	held := notifications(t, r.ep.Held("bob"))
	if len(held) != 2 || held[0].Type != push.TypeMessage || held[0].Seq != seq || held[1].Type != push.TypeUpdate {
		t.Errorf("the offline device gets %+v, want the notification of seq %d and then its update", held, seq)
	}
}

// TestAWaitingPushPreviewsTheEditedText: a push waiting out the minimum
// interval when its message is edited is sent with the new text and the
// seq of that edit (so that an update of an older edit that comes after
// it, a push service keeping no order, does not put the older text back),
// and no update goes for it (nothing showed the old one).
func TestAWaitingPushPreviewsTheEditedText(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Preview, c.MinInterval = true, 2*time.Second })
	r.send(conv, 1, "first")
	r.waitPushes("bob", 1, 3*time.Second)
	seq := r.send(conv, 1, "secret")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE kind = 'message' AND state = 'pending'`)
	ed := r.edit(conv, 1, seq, "oops")
	got := r.waitPushes("bob", 2, 5*time.Second)
	if n := got[1]; n.Type != push.TypeMessage || n.Seq != seq || n.Body != "oops" || n.EditSeq != ed {
		t.Errorf("waiting push = %+v, want seq %d previewing %q of edit %d", n, seq, "oops", ed)
	}
	r.quiet("bob", 2, 800*time.Millisecond)
	for _, p := range r.ep.Pushes() {
		if strings.Contains(string(p.Plaintext), "secret") {
			t.Errorf("a push showed the text before the edit: %s", p.Plaintext)
		}
	}
}

// TestAnEditOfTheMessageAPushPreviewsInPlaceOfASilencedNewerOneUpdatesIt:
// a push decided for carol's "hi" and user 1's newer "spam" is claimed
// after bob blocked user 1, so it previews "hi"; carol edits "hi": the
// update follows, as for any previewed message.
func TestAnEditOfTheMessageAPushPreviewsInPlaceOfASilencedNewerOneUpdatesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Delay, r.cfg.Preview = time.Millisecond, true
	r.subscribe(2, "bob")
	g := r.group(1, 2, 3)
	hi := r.send(g, 3, "hi")
	spam := r.send(g, 1, "spam")
	p := r.pusher()
	// Both decided into the push: a decision made while "spam" is younger
	// than Delay decides "hi" alone, and the edit's decision would not
	// pass the edit while "spam" stays young, before it in the stream.
	testkit.WaitFor(t, 5*time.Second, "hi and spam decided", func() bool {
		if _, err := r.decide(ctx, p, g); err != nil {
			t.Fatal(err)
		}
		return r.count(`SELECT seq FROM push_cursor WHERE conversation_id = $1`, g) >= spam
	})
	if err := r.store.Block(ctx, 2, 1, 100); err != nil {
		t.Fatal(err)
	}
	cs := r.claims(p, 10, time.Minute)
	if len(cs) != 1 {
		t.Fatalf("claimed %d pushes, want bob's", len(cs))
	}
	if err := push.WriteResult(ctx, p, cs[0], "shown", 0); err != nil {
		t.Fatal(err)
	}
	r.edit(g, 3, hi, "hi, all")
	if _, err := r.decide(ctx, p, g); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE kind = 'update' AND user_id = 2 AND seq = $1`, hi); n != 1 {
		t.Errorf("%d updates of %d for bob, want 1\n%s", n, hi, dumpJobs(r))
	}
}
