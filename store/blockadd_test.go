package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// holdAfterInsert makes every INSERT into table wait, after the row is
// written and before its transaction goes on, until release is called: a
// test trigger waits for an advisory lock the test holds.
func holdAfterInsert(t *testing.T, ctx context.Context, pool *pgxpool.Pool, table string) (release func()) {
	t.Helper()
	mustExec(t, ctx, pool, `CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock(424242); RETURN NEW; END $$`)
	mustExec(t, ctx, pool, `CREATE TRIGGER test_hold AFTER INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION test_hold()`)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock(424242)`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// lockWaits counts the sessions of the test's database waiting for a lock.
func lockWaits(t *testing.T, pool *pgxpool.Pool) int64 {
	return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
}

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
		release := holdAfterInsert(t, ctx, pool, "user_block")
		blocked := make(chan error, 1)
		go func() { blocked <- st.Block(ctx, blocker, adder) }()
		waitFor(t, "the block waits after writing user_block", func() bool { return lockWaits(t, pool) == 1 })
		added := make(chan error, 1)
		go func() { _, _, err := st.AddMember(ctx, g.ID, adder, blocker, chat.RoleMember); added <- err }()
		var addErr error
		addDone := false
		waitFor(t, "the add returns or waits for the block", func() bool {
			select {
			case addErr = <-added:
				addDone = true
			default:
			}
			return addDone || lockWaits(t, pool) == 2
		})
		release()
		if err := <-blocked; err != nil {
			t.Fatalf("block: %v", err)
		}
		if !addDone {
			addErr = <-added
		}
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
		release := holdAfterInsert(t, ctx, pool, "conversation_member")
		added := make(chan error, 1)
		go func() { _, _, err := st.AddMember(ctx, g.ID, adder, blocker, chat.RoleMember); added <- err }()
		waitFor(t, "the add waits after writing the member", func() bool { return lockWaits(t, pool) == 1 })
		blocked := make(chan error, 1)
		go func() { blocked <- st.Block(ctx, blocker, adder) }()
		blockDone := false
		waitFor(t, "the block returns or waits for the add", func() bool {
			select {
			case err := <-blocked:
				if err != nil {
					t.Fatalf("block: %v", err)
				}
				blockDone = true
			default:
			}
			return blockDone || lockWaits(t, pool) == 2
		})
		if blockDone {
			t.Errorf("the block committed while an add of the blocker by whom they blocked, which did not see it, was committing")
		}
		release()
		if err := <-added; err != nil {
			t.Fatalf("add: %v", err)
		}
		if !blockDone {
			if err := <-blocked; err != nil {
				t.Fatalf("block: %v", err)
			}
		}
		if n := queryInt(t, pool, `SELECT count(*) FROM user_block WHERE blocker_id = $1 AND blocked_id = $2`, blocker, adder); n != 1 {
			t.Errorf("%d blocks, want 1", n)
		}
	})
}
