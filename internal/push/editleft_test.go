package push_test

import (
	"context"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/push"
)

// previewedToBob starts a rig whose pusher previews, with a group of users
// 1, 2 and 3 in which user 1's message was pushed to bob (user 2) showing
// its text, and answers the rig, the group and the message.
func previewedToBob(t *testing.T) (r *rig, g, seq int64) {
	t.Helper()
	r = newRig(t)
	r.start(func(c *push.Config) { c.Preview = true })
	g = r.group(1, 2, 3)
	r.subscribe(2, "bob")
	seq = r.send(g, 1, "the password is hunter2")
	if got := r.waitPushes("bob", 1, 3*time.Second); got[0].Body != "the password is hunter2" {
		t.Fatalf("push = %+v", got[0])
	}
	return r, g, seq
}

// TestAnEditTakesThePreviewOffAFormerMembersDevices: with previews, bob's
// device shows user 1's "the password is hunter2"; bob is removed from
// the group (or he rejoins: a member again, but not since before the
// message); user 1 edits the message. Bob may not read the new text, and
// his device must not keep showing the old one: it gets a silent remove
// of that message, as a recall sends, carrying no text.
func TestAnEditTakesThePreviewOffAFormerMembersDevices(t *testing.T) {
	t.Parallel()
	for _, rejoin := range []bool{false, true} {
		name := "removed"
		if rejoin {
			name = "rejoined"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, g, seq := previewedToBob(t)
			r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
			if err := r.store.RemoveMember(ctx, g, 1, 2); err != nil {
				t.Fatal(err)
			}
			if rejoin {
				if _, _, err := r.store.AddMember(ctx, g, 1, 2, chat.RoleMember); err != nil {
					t.Fatal(err)
				}
			}
			r.edit(g, 1, seq, "nothing to see")
			got := r.waitPushes("bob", 2, 3*time.Second)
			if n := got[1]; n.Type != push.TypeRemove || n.ConversationID != g || n.Seq != seq || !slices.Equal(n.Seqs, []int64{seq}) || n.Body != "" {
				t.Errorf("push after the edit = %+v, want a silent remove of seq %d", n, seq)
			}
			r.quiet("bob", 2, 500*time.Millisecond)
		})
	}
}
