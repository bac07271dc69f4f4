package store_test

import (
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// TestARemovalListsWhomItEndsSharingPresenceWith: a member.removed of a
// group of at most the large-group size lists the members who no longer
// share such a conversation with the removed user, as far as either could
// see the other's presence: not one who still shares another, nor one
// who hides their own presence; a block hides one way. A removal from a
// larger group lists nobody. The event reaches the outbox with them.
func TestARemovalListsWhomItEndsSharingPresenceWith(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberRemoved}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec), store.WithLargeGroup(5))
	small := mustGroup(t, st, 1, 2, 3, 4, 5)
	mustGroup(t, st, 3, 1)
	large := mustGroup(t, st, 1, 2, 3, 4, 5, 6)
	off := false
	if _, err := st.SetSettings(ctx, 4, chat.SettingsUpdate{Presence: &off}); err != nil {
		t.Fatal(err)
	}
	if err := st.Block(ctx, 2, 1, 5); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, large.ID, 1, 1, "user 1 leaves the large group")
	mustRemove(t, ctx, st, small.ID, 1, 1, "user 1 leaves the small group")
	evs := rec.events()
	if len(evs) != 2 {
		t.Fatalf("published %d member.removed, want 2: %+v", len(evs), evs)
	}
	if ev := evs[0]; ev.PresenceHiddenFrom != nil || ev.PresenceHidden != nil {
		t.Fatalf("leaving a large group: hidden from %v, hidden %v; want none", ev.PresenceHiddenFrom, ev.PresenceHidden)
	}
	// 2 could see 1 (2 blocked 1, not the other way round); 3 shares
	// another group; 4 hides theirs; 5 saw 1 and 1 saw 5.
	if ev := evs[1]; !slices.Equal(ev.PresenceHiddenFrom, []int64{2, 5}) || !slices.Equal(ev.PresenceHidden, []int64{5}) {
		t.Fatalf("leaving the small group: hidden from %v, hidden %v; want [2 5], [5]", ev.PresenceHiddenFrom, ev.PresenceHidden)
	}
	out := outboxEvents(t, pool, small.ID, chat.EventMemberRemoved)
	if len(out) != 1 || !slices.Equal(out[0].PresenceHiddenFrom, []int64{2, 5}) || !slices.Equal(out[0].PresenceHidden, []int64{5}) {
		t.Fatalf("outbox member.removed: %+v", out)
	}
}

// TestLeavingAGroupOf200ReadsWhomItHidesInOneStatement: a member leaving
// a group of the large-group size (200) stops sharing presence with the
// 199 others, read by the one statement of the removal's transaction
// (its time is logged).
func TestLeavingAGroupOf200ReadsWhomItHidesInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberRemoved}}
	st, _ := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	members := make([]int64, 0, 199)
	for u := int64(2); u <= 200; u++ {
		members = append(members, u)
	}
	g := mustGroup(t, st, 1, members...)
	start := time.Now()
	mustRemove(t, ctx, st, g.ID, 7, 7, "user 7 leaves")
	t.Logf("a leave of a group of 200: %v", time.Since(start))
	evs := rec.events()
	if len(evs) != 1 {
		t.Fatalf("%d member.removed published, want 1", len(evs))
	}
	if ev := evs[0]; len(ev.PresenceHiddenFrom) != 199 || len(ev.PresenceHidden) != 199 {
		t.Fatalf("member.removed: hidden from %d, hidden %d; want 199, 199", len(ev.PresenceHiddenFrom), len(ev.PresenceHidden))
	}
}
