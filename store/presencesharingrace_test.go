package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// atOnce runs first and then second while the test holds the outbox,
// which both write after their presence statements read who shares what:
// without a lock in common, both read before either commits (as
// TestAnAddAndARemovalAtOnceLeaveAPairThatStillSharesAGroupUntold).
func atOnce(t *testing.T, pool *pgxpool.Pool, first, second func() error) {
	t.Helper()
	ctx := testCtx(t)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `LOCK TABLE outbox IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	a := testkit.Start(t, "the first change", func() (struct{}, error) { return struct{}{}, first() },
		func() bool { return pgtest.LockWaiters(t, pool) == 1 })
	b := testkit.Start(t, "the second change", func() (struct{}, error) { return struct{}{}, second() },
		func() bool { return pgtest.LockWaiters(t, pool) == 2 })
	if a.Returned() || b.Returned() {
		t.Fatal("a change did not wait at the outbox the test holds")
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// toldPresence is what rec's events told of presence: the presenceShown
// of the last of type shownBy that is not of conversation other, and the
// presenceHidden and presenceHiddenFrom of the last member.removed.
func toldPresence(rec *publishRecorder, shownBy string, other int64) (shown map[int64][]int64, hidden, hiddenFrom []int64) {
	for _, ev := range rec.events() {
		switch ev.Type {
		case shownBy:
			if ev.ConversationID != other {
				shown = ev.PresenceShown
			}
		case chat.EventMemberRemoved:
			hidden, hiddenFrom = ev.PresenceHidden, ev.PresenceHiddenFrom
		}
	}
	return shown, hidden, hiddenFrom
}

// TestAnAddOfOneAndARemovalOfTheOtherAtOnceLeaveAPairThatStillSharesAGroupTold:
// users 1 and 2 share group a; 2 is added to group b, which 1 is in,
// while 1 (not 2) is removed from a, at the same moment. A lock on the
// joining or leaving user alone would not order them (they are different
// users): the add would find them sharing a and tell nothing, the
// removal find them sharing nothing else and hide each from the other,
// and they would end sharing b, told hidden.
func TestAnAddOfOneAndARemovalOfTheOtherAtOnceLeaveAPairThatStillSharesAGroupTold(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberAdded, chat.EventMemberRemoved}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	a := mustGroup(t, st, 3, 1, 2)
	b := mustGroup(t, st, 1)
	atOnce(t, pool, func() error {
		_, _, err := st.AddMember(ctx, b.ID, 1, 2, chat.RoleMember)
		return err
	}, func() error { return st.RemoveMember(ctx, a.ID, 3, 1) })

	if shares, err := store.NewPresence(pool, time.Minute).SharesConversation(ctx, 1, 2); err != nil || !shares {
		t.Fatalf("users 1 and 2 share a conversation: %v (%v), want true", shares, err)
	}
	shown, hidden, hiddenFrom := toldPresence(rec, chat.EventMemberAdded, a.ID)
	if slices.Contains(hiddenFrom, 2) && !slices.Contains(shown[2], 1) {
		t.Fatalf("users 1 and 2 share group b, but the removal hid 1's presence from 2 (presenceHiddenFrom %v) and the add shows it to nobody (presenceShown %v)", hiddenFrom, shown)
	}
	if slices.Contains(hidden, 2) && !slices.Contains(shown[1], 2) {
		t.Fatalf("users 1 and 2 share group b, but the removal hid 2's presence from 1 (presenceHidden %v) and the add shows it to nobody (presenceShown %v)", hidden, shown)
	}
}

// TestTwoRemovalsAtOnceEndingAPairsLastTwoSharedGroupsHideEachFromTheOther:
// users 1 and 2 share groups a and b; 2 is removed from a while 1 is
// removed from b, at the same moment. Each removal, reading the other's
// group as before, would find them sharing it still and hide nothing:
// they would end sharing no conversation, each still shown the other's
// presence (and never told of its changes again).
func TestTwoRemovalsAtOnceEndingAPairsLastTwoSharedGroupsHideEachFromTheOther(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberRemoved}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	a := mustGroup(t, st, 3, 1, 2)
	b := mustGroup(t, st, 3, 1, 2)
	atOnce(t, pool, func() error { return st.RemoveMember(ctx, a.ID, 3, 2) },
		func() error { return st.RemoveMember(ctx, b.ID, 3, 1) })

	if shares, err := store.NewPresence(pool, time.Minute).SharesConversation(ctx, 1, 2); err != nil || shares {
		t.Fatalf("users 1 and 2 share a conversation: %v (%v), want false", shares, err)
	}
	// 1 hidden from 2, and 2 from 1, by whichever removal came second.
	var hiddenOf1, hiddenOf2 bool
	for _, ev := range rec.events() {
		for _, u := range ev.PresenceHiddenFrom {
			hiddenOf1 = hiddenOf1 || ev.UserID == 1 && u == 2
			hiddenOf2 = hiddenOf2 || ev.UserID == 2 && u == 1
		}
		for _, u := range ev.PresenceHidden {
			hiddenOf1 = hiddenOf1 || ev.UserID == 2 && u == 1
			hiddenOf2 = hiddenOf2 || ev.UserID == 1 && u == 2
		}
	}
	if !hiddenOf1 || !hiddenOf2 {
		t.Fatalf("users 1 and 2 share no conversation, but 1's presence hidden from 2: %v, 2's from 1: %v (events %+v)", hiddenOf1, hiddenOf2, rec.events())
	}
}

// TestADirectConversationOpenedAsTheLastSharedGroupIsLeftTellsThePair:
// users 1 and 2 share group a; 1 opens a direct conversation with 2
// while 2 is removed from a, at the same moment. Reading each other's
// conversation as before, the creation would find them sharing a
// (telling nothing) and the removal find no other conversation (hiding
// each from the other): they would share the direct conversation, told
// hidden.
func TestADirectConversationOpenedAsTheLastSharedGroupIsLeftTellsThePair(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventConversationCreated, chat.EventMemberRemoved}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	a := mustGroup(t, st, 3, 1, 2)
	atOnce(t, pool, func() error {
		_, _, err := st.OpenDirect(ctx, 1, 2)
		return err
	}, func() error { return st.RemoveMember(ctx, a.ID, 3, 2) })

	shown, hidden, hiddenFrom := toldPresence(rec, chat.EventConversationCreated, a.ID)
	if slices.Contains(hiddenFrom, 1) && !slices.Contains(shown[1], 2) {
		t.Fatalf("users 1 and 2 share a direct conversation, but the removal hid 2's presence from 1 (presenceHiddenFrom %v) and the creation shows it to nobody (presenceShown %v)", hiddenFrom, shown)
	}
	if slices.Contains(hidden, 1) && !slices.Contains(shown[2], 1) {
		t.Fatalf("users 1 and 2 share a direct conversation, but the removal hid 1's presence from 2 (presenceHidden %v) and the creation shows it to nobody (presenceShown %v)", hidden, shown)
	}
}
