package store_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// shownEqual compares PresenceShown maps, each watcher's subjects in order.
func shownEqual(a, b map[int64][]int64) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int64])
}

// TestAJoinListsWhoStartsSharingPresence: a member.added, or the
// conversation.created of a group or a direct conversation, of at most the
// large-group size maps each member who may now see others' presence to
// them: pairs who shared no such conversation before, neither hiding
// their presence, but one way when one blocked the other. A join that
// makes the group larger lists nobody. The events reach the outbox with
// the map.
func TestAJoinListsWhoStartsSharingPresence(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberAdded, chat.EventConversationCreated}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec), store.WithLargeGroup(5))
	mustGroup(t, st, 3, 1)
	off := false
	if _, err := st.SetSettings(ctx, 4, chat.SettingsUpdate{Presence: &off}); err != nil {
		t.Fatal(err)
	}
	if err := st.Block(ctx, 1, 2, 5); err != nil {
		t.Fatal(err)
	}
	g := mustGroup(t, st, 1)
	for _, u := range []int64{2, 3, 4, 5, 6} {
		mustAdd(t, ctx, st, g.ID, 1, u, "")
	}
	mustGroup(t, st, 7, 1, 3, 8)
	if _, _, err := st.OpenDirect(ctx, 9, 10); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		what  string
		shown map[int64][]int64
	}{
		{"the first group of 3 and 1", map[int64][]int64{1: {3}, 3: {1}}},
		{"user 1's group, alone", nil},
		// 1 blocked 2: 1 sees 2, not the other way round.
		{"2 joins", map[int64][]int64{1: {2}}},
		// 3 shares another group with 1.
		{"3 joins", map[int64][]int64{2: {3}, 3: {2}}},
		{"4, who hides their presence, joins", nil},
		{"5 joins", map[int64][]int64{1: {5}, 2: {5}, 3: {5}, 5: {1, 2, 3}}},
		{"6 joins, the group grows past 5", nil},
		{"7 creates a group with 1, 3 and 8", map[int64][]int64{1: {7, 8}, 3: {7, 8}, 7: {1, 3, 8}, 8: {1, 3, 7}}},
		{"9 opens a direct conversation with 10", map[int64][]int64{9: {10}, 10: {9}}},
	}
	evs := rec.events()
	if len(evs) != len(want) {
		t.Fatalf("published %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		if !shownEqual(evs[i].PresenceShown, w.shown) {
			t.Errorf("%s: presence shown %v, want %v", w.what, evs[i].PresenceShown, w.shown)
		}
	}
	out := outboxEvents(t, pool, g.ID, chat.EventMemberAdded)
	if len(out) != 5 || !shownEqual(out[3].PresenceShown, want[5].shown) {
		t.Fatalf("outbox member.added: %+v", out)
	}
}

// TestJoiningAGroupOf200ReadsWhomItShowsInOneStatement: a member added to
// a group of 199 (the large-group size, 200, after it), and a group of
// 200 created at once, read who starts sharing presence with whom in the
// one statement of their transaction (the times are logged).
func TestJoiningAGroupOf200ReadsWhomItShowsInOneStatement(t *testing.T) {
	t.Parallel()
	rec := &publishRecorder{types: []string{chat.EventMemberAdded, chat.EventConversationCreated}}
	st, _ := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	members := make([]int64, 0, 199)
	for u := int64(2); u <= 199; u++ {
		members = append(members, u)
	}
	g := mustGroup(t, st, 1, members...)
	start := time.Now()
	mustAdd(t, testCtx(t), st, g.ID, 1, 1000, "")
	t.Logf("adding a member to a group of 199: %v", time.Since(start))
	start = time.Now()
	mustGroup(t, st, 2000, append(slices.Clone(members), 1000)...)
	t.Logf("creating a group of 200 (199 of whom share another): %v", time.Since(start))
	fresh := make([]int64, 0, 199)
	for u := int64(3001); u <= 3199; u++ {
		fresh = append(fresh, u)
	}
	start = time.Now()
	mustGroup(t, st, 3000, fresh...)
	t.Logf("creating a group of 200 strangers: %v", time.Since(start))
	evs := rec.events()
	if len(evs) != 4 {
		t.Fatalf("%d events published, want 4", len(evs))
	}
	if shown := evs[1].PresenceShown; len(shown) != 200 || len(shown[1000]) != 199 || !slices.Equal(shown[1], []int64{1000}) {
		t.Fatalf("member.added: %d watchers, the new member sees %d", len(shown), len(shown[1000]))
	}
	// 2000 is new to all; the 199 others shared the first group.
	if shown := evs[2].PresenceShown; len(shown) != 200 || len(shown[2000]) != 199 || !slices.Equal(shown[3], []int64{2000}) {
		t.Fatalf("conversation.created, mostly shared: %d watchers, the creator sees %d", len(shown), len(shown[2000]))
	}
	if shown := evs[3].PresenceShown; len(shown) != 200 || len(shown[3000]) != 199 || len(shown[3100]) != 199 {
		t.Fatalf("conversation.created of strangers: %d watchers", len(shown))
	}
}

// TestAGroupCreatedWithMoreThan200MembersListsNobody: with the large-group
// size raised to 300, a group of 201 created at once would list 201 × 200
// pairs, an event past what the relay hands Kafka as the size grows (1
// MiB a row); it lists nobody: its members may ask.
func TestAGroupCreatedWithMoreThan200MembersListsNobody(t *testing.T) {
	t.Parallel()
	rec := &publishRecorder{types: []string{chat.EventConversationCreated}}
	st, _ := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec), store.WithLargeGroup(300))
	members := make([]int64, 0, 200)
	for u := int64(2); u <= 201; u++ {
		members = append(members, u)
	}
	mustGroup(t, st, 1, members...)
	mustGroup(t, st, 1, 202)
	evs := rec.events()
	if len(evs) != 2 {
		t.Fatalf("%d events published, want 2", len(evs))
	}
	if n := len(evs[0].PresenceShown); n != 0 {
		t.Fatalf("a group of 201 created: %d watchers listed, want none", n)
	}
	if n := len(evs[1].PresenceShown); n != 2 {
		t.Fatalf("a group of 2 created: %d watchers listed, want 2", n)
	}
}
