package store_test

import (
	"slices"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// The blocker may open the direct conversation after the block: the
// blocked user still writes nothing into it, until the block is lifted.
func TestABlockMadeBeforeTheDirectConversationRefusesTheBlockedWriterInIt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	const blocker, blocked = 1, 2
	if err := st.Block(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	d, created, err := st.OpenDirect(ctx, blocker, blocked)
	if err != nil || !created {
		t.Fatalf("the blocker opens the conversation: created %v, %v", created, err)
	}
	_, err = st.Send(ctx, sendReq(d.ID, blocked, "let me talk"))
	wantCode(t, "blocked sends", err, chat.CodeBlocked)
	mustSend(t, st, d.ID, blocker, "the blocker still can")
	if err := st.Unblock(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, d.ID, blocked, "unblocked")
}

// Blocks, unblocks and the creation of direct conversations racing for the
// same pairs leave every member row saying what user_block says.
func TestBlocksAndDirectConversationsRacingAgreeOnWhoIsBlocked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const pairs = 40
	// Pair i is users 1000+2i and 1001+2i; per pair, one opening of the
	// conversation races one block (even i: the low user blocks, odd: the
	// high one) and, for every third pair, an unblock.
	errs := concurrently(3*pairs, func(i int) error {
		p := int64(i % pairs)
		low, high := 1000+2*p, 1001+2*p
		blocker, blocked := low, high
		if p%2 == 1 {
			blocker, blocked = high, low
		}
		switch i / pairs {
		case 0:
			_, _, err := st.OpenDirect(ctx, blocker, blocked)
			return err
		case 1:
			return st.Block(ctx, blocker, blocked, 100)
		default:
			if p%3 == 0 {
				return st.Unblock(ctx, blocker, blocked, 100)
			}
			return nil
		}
	})
	tally(t, "open, block and unblock", errs, func(error) bool { return false })
	if n := queryInt(t, pool, `SELECT count(*) FROM direct_pair WHERE user_low >= 1000`); n != pairs {
		t.Fatalf("%d direct conversations, want %d", n, pairs)
	}
	if n := queryInt(t, pool, `
		SELECT count(*) FROM direct_pair p JOIN conversation_member m ON m.conversation_id = p.conversation_id
		WHERE p.user_low >= 1000 AND m.peer_blocked IS DISTINCT FROM EXISTS (
			SELECT 1 FROM user_block b WHERE b.blocked_id = m.user_id AND b.blocker_id IN (p.user_low, p.user_high))`); n != 0 {
		t.Fatalf("%d member rows disagree with user_block", n)
	}
}

// Migration 0022 marks the members of existing direct conversations whom
// the other member had blocked.
func TestMigration0022MarksTheBlockedMembersOfExistingDirectConversations(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := freshPool(t)
	m22 := migrateBefore(t, ctx, pool, 22).SQL
	if !strings.Contains(m22, "peer_blocked") {
		t.Fatal("no migration 0022 adding peer_blocked")
	}
	// Users 1 and 2 (1 blocked 2), 3 and 4 (nobody blocked anybody), 5 and
	// 6 (both blocked each other).
	mustExec(t, ctx, pool, `
		INSERT INTO conversation (id, type) VALUES (1, 'DIRECT'), (2, 'DIRECT'), (3, 'DIRECT');
		INSERT INTO direct_pair (user_low, user_high, conversation_id) VALUES (1, 2, 1), (3, 4, 2), (5, 6, 3);
		INSERT INTO conversation_member (conversation_id, user_id, role)
		VALUES (1, 1, 'member'), (1, 2, 'member'), (2, 3, 'member'), (2, 4, 'member'), (3, 5, 'member'), (3, 6, 'member');
		INSERT INTO user_block (blocker_id, blocked_id) VALUES (1, 2), (5, 6), (6, 5), (4, 7)`)
	mustExec(t, ctx, pool, m22)
	rows, err := pool.Query(ctx, `SELECT user_id FROM conversation_member WHERE peer_blocked ORDER BY user_id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rows.Next() {
		var u int64
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		got = append(got, u)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("marked members %v, want %v", got, want)
	}
}

// A blocked user's typing indicator never reaches the blocker in their
// direct conversation (blocked, like a message): it would tell them, once
// a second, "is typing…" from someone they blocked. Lifting the block
// lets it through again; the blocker's own indicator is theirs to send.
func TestABlockedUsersTypingNeverReachesTheBlocker(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventTyping}}
	st, _ := newStoreRecording(t, rec)
	const blocker, blocked = 1, 2
	d, _, err := st.OpenDirect(ctx, blocker, blocked)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Block(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	err = st.Typing(ctx, d.ID, blocked)
	wantCode(t, "the blocked user types", err, chat.CodeBlocked)
	if evs := rec.events(); len(evs) != 0 {
		t.Fatalf("the blocked user's typing was published: %+v", evs)
	}
	if err := st.Typing(ctx, d.ID, blocker); err != nil {
		t.Fatalf("the blocker types: %v", err)
	}
	if err := st.Unblock(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Typing(ctx, d.ID, blocked); err != nil {
		t.Fatalf("typing after the unblock: %v", err)
	}
	if evs := rec.events(); len(evs) != 2 || evs[0].UserID != blocker || evs[1].UserID != blocked {
		t.Fatalf("typing events %+v, want the blocker's then the unblocked user's", evs)
	}
}
