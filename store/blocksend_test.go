package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestADirectMessageRacingABlockIsRefusedOrCommitsBeforeTheBlock: user 2
// sends to user 1 while user 1 blocks user 2. Block first (held after it
// marked user 2's member row, uncommitted): the send waits for it and is
// refused 403 blocked, never delivered after the block answered. Send
// first (held after it wrote the message, uncommitted): the block waits
// until the send has committed, so the message is there before the block
// is, as one sent earlier.
func TestADirectMessageRacingABlockIsRefusedOrCommitsBeforeTheBlock(t *testing.T) {
	t.Parallel()
	const blocker, sender = 1, 2
	t.Run("block first", func(t *testing.T) {
		t.Parallel()
		ctx, st, pool, d := directOf(t, blocker, sender)
		release := pgtest.HoldAfterUpdate(t, ctx, pool, "conversation_member")
		blocked := testkit.Start(t, "the block", func() (struct{}, error) {
			return struct{}{}, st.Block(ctx, blocker, sender, 100)
		}, func() bool { return pgtest.LockWaiters(t, pool) == 1 })
		if blocked.Returned() {
			t.Fatal("the block did not wait after marking the member row")
		}
		sent := testkit.Start(t, "the send", func() (chat.SendResult, error) {
			return st.Send(ctx, sendReq(d.ID, sender, "just before the block"))
		}, func() bool { return pgtest.LockWaiters(t, pool) == 2 })
		release()
		if _, err := blocked.Wait(); err != nil {
			t.Fatalf("block: %v", err)
		}
		_, sendErr := sent.Wait()
		wantCode(t, "a send that waited for the block's commit", sendErr, chat.CodeBlocked)
		if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND sender_id = $2`, d.ID, sender); n != 0 {
			t.Errorf("the blocker got %d message(s) from whom they blocked, committed after the block answered", n)
		}
	})
	t.Run("send first", func(t *testing.T) {
		t.Parallel()
		ctx, st, pool, d := directOf(t, blocker, sender)
		release := pgtest.HoldAfterInsert(t, ctx, pool, "message")
		sent := testkit.Start(t, "the send", func() (chat.SendResult, error) {
			return st.Send(ctx, sendReq(d.ID, sender, "just before the block"))
		}, func() bool { return pgtest.LockWaiters(t, pool) == 1 })
		if sent.Returned() {
			t.Fatal("the send did not wait after writing the message")
		}
		blocked := testkit.Start(t, "the block", func() (struct{}, error) {
			return struct{}{}, st.Block(ctx, blocker, sender, 100)
		}, func() bool { return pgtest.LockWaiters(t, pool) == 2 })
		if blocked.Returned() {
			t.Errorf("the block answered while a message of whom it blocks, which did not see it, was still to commit")
		}
		release()
		if _, err := sent.Wait(); err != nil {
			t.Fatalf("send: %v", err)
		}
		if _, err := blocked.Wait(); err != nil {
			t.Fatalf("block: %v", err)
		}
	})
}

// TestBlocksUnblocksProfilesAndSendsRacingNeverDeadlock: for two
// seconds, both users of a direct conversation send into it and into a
// group they share (batches of several conversations), block and unblock
// each other, and user 1 changes the profile a block tells again; every
// call ends, answered or refused 403 blocked, none by a deadlock.
func TestBlocksUnblocksProfilesAndSendsRacingNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	d, _, err := st.OpenDirect(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	g := mustGroup(t, st, 1, 2)
	stop := time.Now().Add(2 * time.Second)
	errs := concurrently(7, func(i int) error {
		for n := 0; time.Now().Before(stop); n++ {
			var err error
			switch i {
			case 0, 1: // user 1 and user 2 write into both conversations
				u, c := int64(i+1), d.ID
				if n%2 == 1 {
					c = g.ID
				}
				_, err = st.Send(ctx, sendReq(c, u, "x"))
			case 2, 3:
				_, err = st.Send(ctx, sendReq(d.ID, int64(i-1), "y"))
			case 4, 5: // user 1 blocks user 2 and lifts it, and the reverse
				blocker, blocked := int64(i-3), int64(6-i)
				if n%2 == 0 {
					err = st.Block(ctx, blocker, blocked, 100)
				} else {
					err = st.Unblock(ctx, blocker, blocked, 100)
				}
			default:
				about := fmt.Sprint("about ", n)
				_, err = st.SetProfile(ctx, 1, chat.ProfileUpdate{DisplayName: "one", About: &about}, 100)
			}
			if err != nil && !isCode(err, chat.CodeBlocked) {
				return fmt.Errorf("call %d of %d: %w", n, i, err)
			}
		}
		return nil
	})
	tally(t, "sends, blocks and profile writes", errs, func(error) bool { return false })
}

// directOf is a store of its own and the direct conversation of a and b in it.
func directOf(t *testing.T, a, b int64) (context.Context, *store.Store, *pgxpool.Pool, chat.Conversation) {
	t.Helper()
	ctx := testCtx(t)
	st, pool := newStore(t)
	d, _, err := st.OpenDirect(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, st, pool, d
}
