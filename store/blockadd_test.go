package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestABlockAndAnAddOfTheBlockerAtTheSameMomentNeverLeaveTheBlockerAdded:
// user 2 blocks user 1 while user 1 adds user 2 to a group. Block first
// (held after it wrote user_block, uncommitted): the add waits for it and
// is refused 403 blocked. Add first (held after it wrote the member row):
// the block waits until the add has committed, so the member exists
// before the block does, as with an add made earlier.
func TestABlockAndAnAddOfTheBlockerAtTheSameMomentNeverLeaveTheBlockerAdded(t *testing.T) {
	t.Parallel()
	const adder, blocker = 1, 2
	t.Run("block first", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		st, pool := newStore(t)
		g := mustGroup(t, st, adder, 3)
		release := pgtest.HoldAfterInsert(t, ctx, pool, "user_block")
		blocked := testkit.Start(t, "the block", func() (struct{}, error) {
			return struct{}{}, st.Block(ctx, blocker, adder, 100)
		}, func() bool { return pgtest.LockWaiters(t, pool) == 1 })
		if blocked.Returned() {
			t.Fatal("the block did not wait after writing user_block")
		}
		added := testkit.Start(t, "the add", func() (struct{}, error) {
			_, _, err := st.AddMember(ctx, g.ID, adder, blocker, chat.RoleMember)
			return struct{}{}, err
		}, func() bool { return pgtest.LockWaiters(t, pool) == 2 })
		release()
		if _, err := blocked.Wait(); err != nil {
			t.Fatalf("block: %v", err)
		}
		_, addErr := added.Wait()
		wantCode(t, "adding someone whose block of you is committing", addErr, chat.CodeBlocked)
		if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND user_id = $2`, g.ID, blocker); n != 0 {
			t.Errorf("the blocker was added to the group by whom they blocked")
		}
	})
	t.Run("add first", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		st, pool := newStore(t)
		g := mustGroup(t, st, adder, 3)
		release := pgtest.HoldAfterInsert(t, ctx, pool, "conversation_member")
		added := testkit.Start(t, "the add", func() (struct{}, error) {
			_, _, err := st.AddMember(ctx, g.ID, adder, blocker, chat.RoleMember)
			return struct{}{}, err
		}, func() bool { return pgtest.LockWaiters(t, pool) == 1 })
		if added.Returned() {
			t.Fatal("the add did not wait after writing the member")
		}
		blocked := testkit.Start(t, "the block", func() (struct{}, error) {
			return struct{}{}, st.Block(ctx, blocker, adder, 100)
		}, func() bool { return pgtest.LockWaiters(t, pool) == 2 })
		if blocked.Returned() {
			t.Errorf("the block committed while an add of the blocker by whom they blocked, which did not see it, was committing")
		}
		release()
		if _, err := added.Wait(); err != nil {
			t.Fatalf("add: %v", err)
		}
		if _, err := blocked.Wait(); err != nil {
			t.Fatalf("block: %v", err)
		}
		if n := queryInt(t, pool, `SELECT count(*) FROM user_block WHERE blocker_id = $1 AND blocked_id = $2`, blocker, adder); n != 1 {
			t.Errorf("%d blocks, want 1", n)
		}
	})
}
