package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	chat "github.com/chatd/chatd"
)

func TestMarkReadWatermarkOnlyMovesForwardAndStopsAtLastSeq(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	sendN(t, st, conv.ID, 1, 5, "m")

	check := func(what string, seq int64, want chat.ReadResult) {
		t.Helper()
		got, err := st.MarkRead(ctx, conv.ID, 2, seq)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != want {
			t.Fatalf("%s: got %+v, want %+v", what, got, want)
		}
	}
	check("read to 4", 4, chat.ReadResult{Advanced: true, LastReadSeq: 4})
	check("late receipt for 2", 2, chat.ReadResult{Advanced: false, LastReadSeq: 4})
	check("same seq again", 4, chat.ReadResult{Advanced: false, LastReadSeq: 4})
	check("past the end", 1000, chat.ReadResult{Advanced: true, LastReadSeq: 5})
	check("past the end again", 1000, chat.ReadResult{Advanced: false, LastReadSeq: 5})

	page, err := st.Inbox(ctx, 2, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Conversations) != 1 || page.Conversations[0].Unread != 0 || page.Conversations[0].LastReadSeq != 5 {
		t.Fatalf("inbox after reading past the end: %+v", page.Conversations)
	}

	for _, seq := range []int64{0, -1} {
		_, err := st.MarkRead(ctx, conv.ID, 2, seq)
		wantCode(t, "mark read with a non-positive seq", err, chat.CodeInvalid)
	}

	// Only the two advances produced events, with the new watermark, and
	// the conversation's last_seq as it moved (delivery's position).
	evs := outboxEvents(t, pool, conv.ID, chat.EventReadUpdated)
	if len(evs) != 2 || evs[0].UserID != 2 || evs[0].Seq != 4 || evs[1].UserID != 2 || evs[1].Seq != 5 {
		t.Fatalf("read.updated events: %+v", evs)
	}
	if evs[0].LastSeq != 5 || evs[1].LastSeq != 5 {
		t.Fatalf("read.updated events' lastSeq: %d and %d, want 5 (the conversation's last_seq)", evs[0].LastSeq, evs[1].LastSeq)
	}
}

func TestSendAdvancesTheSendersOwnWatermark(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	sendN(t, st, conv.ID, 1, 3, "m")
	if m := member(t, st, conv.ID, 1, 1); m.LastReadSeq != 3 {
		t.Fatalf("sender's watermark = %d after sending 1..3", m.LastReadSeq)
	}
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != 0 {
		t.Fatalf("other member's watermark = %d, want 0", m.LastReadSeq)
	}
	msg := mustSend(t, st, conv.ID, 2, "reply")
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != msg.Seq {
		t.Fatalf("replier's watermark = %d, want %d", m.LastReadSeq, msg.Seq)
	}
	page, err := st.Inbox(ctx, 2, 0, "")
	if err != nil || page.Conversations[0].Unread != 0 {
		t.Fatalf("replier's inbox: %+v, %v", page, err)
	}
	page, err = st.Inbox(ctx, 1, 0, "")
	if err != nil || page.Conversations[0].Unread != 1 {
		t.Fatalf("first sender's inbox: %+v, %v", page, err)
	}
	// A send's watermark move is part of message.new, not a read.updated.
	if evs := outboxEvents(t, pool, conv.ID, chat.EventReadUpdated); len(evs) != 0 {
		t.Fatalf("sends wrote read.updated events: %+v", evs)
	}
}

func TestMarkReadConcurrentReceiptsNeverMoveBackwards(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	sendN(t, st, conv.ID, 1, 50, "m")
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := st.MarkRead(ctx, conv.ID, 2, rand.Int64N(60)+1); err != nil {
					t.Errorf("mark read: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := outboxEvents(t, pool, conv.ID, chat.EventReadUpdated)
	if len(evs) == 0 {
		t.Fatal("no read.updated events")
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("read.updated went from %d to %d", evs[i-1].Seq, evs[i].Seq)
		}
	}
	m := member(t, st, conv.ID, 1, 2)
	if last := evs[len(evs)-1].Seq; m.LastReadSeq != last || last > 50 {
		t.Fatalf("watermark %d, last event %d, last_seq 50", m.LastReadSeq, last)
	}
}

func TestSeenByCountsMembersOtherThanTheSender(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	conv := mustGroup(t, st, 1, 2, 3, 4)
	sendN(t, st, conv.ID, 2, 3, "m") // seqs 1..3 by user 2
	mustMarkRead(t, ctx, st, conv.ID, 3, 2)
	mustMarkRead(t, ctx, st, conv.ID, 4, 3)
	seen := func(viewer, seq int64, want chat.SeenResult) {
		t.Helper()
		wantSeen(t, ctx, st, conv.ID, viewer, seq, want, fmt.Sprintf("viewer %d", viewer))
	}
	// Members other than sender 2: 1 (read 0), 3 (read 2), 4 (read 3).
	seen(1, 1, chat.SeenResult{SeenBy: 2, DeliveredTo: 2, Members: 3})
	seen(2, 2, chat.SeenResult{SeenBy: 2, DeliveredTo: 2, Members: 3})
	seen(3, 3, chat.SeenResult{SeenBy: 1, DeliveredTo: 1, Members: 3})

	mine := mustSend(t, st, conv.ID, 1, "from the owner") // seq 4; the owner's watermark follows
	seen(1, mine.Seq, chat.SeenResult{SeenBy: 0, DeliveredTo: 0, Members: 3})
	mustMarkRead(t, ctx, st, conv.ID, 2, mine.Seq)
	seen(1, mine.Seq, chat.SeenResult{SeenBy: 1, DeliveredTo: 1, Members: 3})

	// After the sender leaves, everyone left counts: 1 (read 4), 3 (2), 4 (3).
	mustRemove(t, ctx, st, conv.ID, 2, 2, "user 2 leaves")
	seen(1, 2, chat.SeenResult{SeenBy: 3, DeliveredTo: 3, Members: 3})
	seen(1, 3, chat.SeenResult{SeenBy: 2, DeliveredTo: 2, Members: 3})

	_, err := st.SeenBy(ctx, conv.ID, 1, 5)
	wantCode(t, "seen by past last_seq", err, chat.CodeNotFound)
	_, err = st.SeenBy(ctx, conv.ID, 1, 0)
	wantCode(t, "seen by seq 0", err, chat.CodeInvalid)
	_, err = st.SeenBy(ctx, conv.ID, 2, 1)
	wantCode(t, "seen by from a member who left", err, chat.CodeNotMember)
}
