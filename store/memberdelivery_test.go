package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// groupWithMessages is a fresh store with a group of creator and members
// holding n messages from the creator.
func groupWithMessages(t *testing.T, n int, creator int64, members ...int64) (*store.Store, *pgxpool.Pool, chat.Conversation) {
	t.Helper()
	st, pool := newStore(t)
	conv := mustGroup(t, st, creator, members...)
	for range n {
		mustSend(t, st, conv.ID, creator, "m")
	}
	return st, pool, conv
}

// deliveredRow is user's member_delivery.delivered_seq in conv.
func deliveredRow(t *testing.T, pool *pgxpool.Pool, conv, user int64) int64 {
	t.Helper()
	return queryInt(t, pool, "SELECT delivered_seq FROM member_delivery WHERE conversation_id = $1 AND user_id = $2", conv, user)
}

// A delivered-watermark flush moves the delivered watermarks of members
// who also send, and group commit locks a sender's member row to move its
// read watermark. Neither may wait for the other's commit (migration 0009:
// the flush writes member_delivery, not conversation_member).
func TestSendIsNotHeldUpByAnUncommittedDeliveredFlushOfItsSender(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	conv := mustGroup(t, st, 1, 2)
	mustSend(t, st, conv.ID, 2, "to user 1")
	tx, err := pool.Begin(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(testCtx(t), store.DeliveredBatchSQL, []int64{conv.ID}, []int64{1}, []int64{1}); err != nil {
		t.Fatalf("delivered flush: %v", err)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
	defer cancel()
	start := time.Now()
	res, err := st.Send(ctx, sendReq(conv.ID, 1, "while my delivered watermark moves"))
	if err != nil {
		t.Fatalf("send while a delivered flush holds its sender's watermark: %v (after %v)", err, time.Since(start))
	}
	if res.Message.Seq != 2 {
		t.Fatalf("seq %d, want 2", res.Message.Seq)
	}
	if err := tx.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The flush committed its 1 and the send moved the read watermark to
	// 2; the member is shown delivered at least as far as read.
	if n := deliveredRow(t, pool, conv.ID, 1); n != 1 {
		t.Fatalf("member_delivery %d after the flush, want 1", n)
	}
	if m := member(t, st, conv.ID, 1, 1); m.LastReadSeq != 2 || m.LastDeliveredSeq != 2 {
		t.Fatalf("user 1: read %d, delivered %d; want 2 and 2", m.LastReadSeq, m.LastDeliveredSeq)
	}
}

// The delivered watermark is the greater of what read receipts and joins
// set and what delivered flushes set, and it never moves back.
func TestDeliveredWatermarkIsTheGreaterOfReadsAndDeliveredFlushes(t *testing.T) {
	t.Parallel()
	st, pool, conv := groupWithMessages(t, 5, 1, 2)
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: time.Millisecond})
	r.Delivered(conv.ID, 2, 3)
	waitFor(t, "the delivered flush", func() bool { return member(t, st, conv.ID, 1, 2).LastDeliveredSeq == 3 })
	if _, err := st.MarkRead(testCtx(t), conv.ID, 2, 4); err != nil {
		t.Fatal(err)
	}
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != 4 || m.LastDeliveredSeq != 4 {
		t.Fatalf("after reading 4: read %d, delivered %d; want 4 and 4", m.LastReadSeq, m.LastDeliveredSeq)
	}
	// An ack older than the read moves nothing back, in either table.
	before := r.DeliveredFlushes()
	r.Delivered(conv.ID, 2, 2)
	waitFor(t, "the older ack's flush", func() bool { return r.DeliveredFlushes() > before })
	if m := member(t, st, conv.ID, 1, 2); m.LastDeliveredSeq != 4 {
		t.Fatalf("after an older ack: delivered %d, want 4", m.LastDeliveredSeq)
	}
	if n := deliveredRow(t, pool, conv.ID, 2); n != 3 {
		t.Fatalf("member_delivery %d after an older ack, want 3", n)
	}
	r.Delivered(conv.ID, 2, 5)
	waitFor(t, "the newer ack's flush", func() bool { return member(t, st, conv.ID, 1, 2).LastDeliveredSeq == 5 })
	if n := deliveredRow(t, pool, conv.ID, 2); n != 5 {
		t.Fatalf("member_delivery %d, want 5", n)
	}
}

// A member who leaves takes their member_delivery row along; one who
// rejoins starts at the conversation's last_seq, as any new member does
// (3 messages, the leave's system entry, one more message: 5).
func TestALeavingMemberTakesTheirDeliveredWatermarkAlong(t *testing.T) {
	t.Parallel()
	st, pool, conv := groupWithMessages(t, 3, 1, 2, 3)
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: time.Millisecond})
	r.Delivered(conv.ID, 3, 2)
	rows := func() int64 {
		return queryInt(t, pool, "SELECT count(*) FROM member_delivery WHERE conversation_id = $1 AND user_id = 3", conv.ID)
	}
	waitFor(t, "user 3's delivered watermark", func() bool { return rows() == 1 })
	if err := st.RemoveMember(testCtx(t), conv.ID, 3, 3); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d member_delivery rows left for a member who left", n)
	}
	mustSend(t, st, conv.ID, 1, "after")
	m, _, err := st.AddMember(testCtx(t), conv.ID, 1, 3, "")
	if err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	if m.LastReadSeq != 5 || m.LastDeliveredSeq != 5 {
		t.Fatalf("rejoined: read %d, delivered %d; want 5 and 5", m.LastReadSeq, m.LastDeliveredSeq)
	}
}

// Two nodes' delivered flushes can race: the one that planned from an older
// snapshot must not move member_delivery back when it commits second.
func TestALateDeliveredFlushNeverMovesTheWatermarkBack(t *testing.T) {
	t.Parallel()
	_, pool, conv := groupWithMessages(t, 3, 1, 2)
	flush := func(seq int64) {
		t.Helper()
		if _, err := pool.Exec(testCtx(t), store.DeliveredBatchSQL, []int64{conv.ID}, []int64{2}, []int64{seq}); err != nil {
			t.Fatalf("delivered flush of %d: %v", seq, err)
		}
	}
	flush(3)
	flush(2)
	if n := deliveredRow(t, pool, conv.ID, 2); n != 3 {
		t.Fatalf("member_delivery %d after a late flush of 2, want 3", n)
	}
}
