package store_test

import (
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// TestAnAddAndARemovalAtOnceLeaveAPairThatStillSharesAGroupUntold: users 1
// and 2 share group a; user 1 adds 2 to group b while, at the same time,
// 2 is removed from a. Each transaction reads the other's conversation
// as it was before the other committed (READ COMMITTED, no lock in
// common): the add finds them sharing a already (presenceStarted lists
// nothing), the removal finds them sharing nothing else (presenceEnded
// hides each from the other). They end sharing b: each was told the
// other's presence is hidden, and never given it again
// (docs/protocol.md "Presence": a pair that starts sharing gets each
// other's state; one that stops sharing its last conversation is told
// hidden). The two statements are held at the outbox, which both write
// after reading, so both read before either commits (atOnce).
func TestAnAddAndARemovalAtOnceLeaveAPairThatStillSharesAGroupUntold(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberAdded, chat.EventMemberRemoved}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	a := mustGroup(t, st, 1, 2)
	b := mustGroup(t, st, 1)

	atOnce(t, pool, func() error {
		_, _, err := st.AddMember(ctx, b.ID, 1, 2, chat.RoleMember)
		return err
	}, func() error { return st.RemoveMember(ctx, a.ID, 1, 2) })
	if shares, err := store.NewPresence(pool, time.Minute).SharesConversation(ctx, 1, 2); err != nil || !shares {
		t.Fatalf("users 1 and 2 share a conversation: %v (%v), want true", shares, err)
	}
	shown, _, hiddenFrom := toldPresence(rec, chat.EventMemberAdded, a.ID)
	if slices.Contains(hiddenFrom, 1) && !slices.Contains(shown[1], 2) {
		t.Fatalf("users 1 and 2 share group b, but the removal hid 2's presence from 1 (presenceHiddenFrom %v) and the add shows it to nobody (presenceShown %v): 1 is never told 2's state", hiddenFrom, shown)
	}
}
