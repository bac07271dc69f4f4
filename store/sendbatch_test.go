package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// TestMixedBatchGivesEachSendItsOwnOutcome holds the conversations locked so
// that the next batch (one transaction in flight at most) gathers a mix of
// good and bad sends, then checks every request's outcome and that the good
// ones committed gaplessly.
func TestMixedBatchGivesEachSendItsOwnOutcome(t *testing.T) {
	ctx := testCtx(t)
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithBatching(512, 1))
	a := mustGroup(t, st, 1, 2)
	b := mustGroup(t, st, 3, 4)
	earlier := mustSend(t, st, a.ID, 1, "earlier") // seq 1 in a

	// Block the only transaction in flight inside a batch waiting for a's lock.
	release := pgtest.LockConversation(t, ctx, pool, a.ID)
	blocker := make(chan error, 1)
	go func() {
		_, err := st.Send(ctx, sendReq(a.ID, 2, "blocked"))
		blocker <- err
	}()
	// Wait until that transaction waits for the lock.
	lockWait := time.Now().Add(10 * time.Second)
	for pgtest.LockWaiters(t, pool) == 0 {
		if time.Now().After(lockWait) {
			t.Fatal("the first batch never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitBatches := func(n int64) {
		deadline := time.Now().Add(10 * time.Second)
		for st.BatchStats().Messages < n {
			if time.Now().After(deadline) {
				t.Fatalf("batcher processed %d sends, want %d", st.BatchStats().Messages, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	before := st.BatchStats()

	dupID := uuid.NewString()
	type tc struct {
		name string
		req  chat.SendRequest
		want chat.Code // "" = commits
		dup  bool
	}
	cases := []tc{
		{"good a", sendReq(a.ID, 1, "a1"), "", false},
		{"good b", sendReq(b.ID, 3, "b1"), "", false},
		{"non-member", sendReq(a.ID, 3, "intruder"), chat.CodeNotMember, false},
		{"unknown conversation", sendReq(999999, 1, "void"), chat.CodeNotFound, false},
		{"resend of a committed message", chat.SendRequest{ConversationID: a.ID, SenderID: 1, ClientMsgID: earlier.ClientMsgID, Body: "earlier"}, "", true},
		{"someone else's clientMsgId", chat.SendRequest{ConversationID: a.ID, SenderID: 2, ClientMsgID: earlier.ClientMsgID, Body: "mine?"}, chat.CodeConflict, false},
		{"first of a pair", chat.SendRequest{ConversationID: b.ID, SenderID: 4, ClientMsgID: dupID, Body: "pair"}, "", false},
		{"good a again", sendReq(a.ID, 2, "a2"), "", false},
		{"invalid body", chat.SendRequest{ConversationID: a.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "bad\x00"}, chat.CodeInvalid, false},
		{"good b again", sendReq(b.ID, 4, "b2"), "", false},
	}
	results := make([]chat.SendResult, len(cases)+1)
	errs := make([]error, len(cases)+1)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = st.Send(ctx, c.req)
		}()
	}
	// The second of the pair, same sender and clientMsgId, in the same batch.
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[len(cases)], errs[len(cases)] = st.Send(ctx, chat.SendRequest{ConversationID: b.ID, SenderID: 4, ClientMsgID: dupID, Body: "pair"})
	}()
	// Let them all queue behind the blocked batch (the invalid one fails
	// before queueing), then release the lock.
	deadline := time.Now().Add(10 * time.Second)
	for st.BatchStats().Queued < len(cases) { // all but the invalid one, plus the pair's second
		if time.Now().After(deadline) {
			t.Fatalf("only %d sends queued", st.BatchStats().Queued)
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	wg.Wait()
	if err := <-blocker; err != nil {
		t.Fatalf("blocked send: %v", err)
	}
	waitBatches(before.Messages + 1)

	for i, c := range cases {
		err := errs[i]
		if c.want != "" {
			wantCode(t, c.name, err, c.want)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if i != 6 && results[i].Duplicate != c.dup {
			t.Fatalf("%s: duplicate=%v, want %v", c.name, results[i].Duplicate, c.dup)
		}
	}
	if results[4].Message.Seq != earlier.Seq {
		t.Fatalf("resend got seq %d, want the original %d", results[4].Message.Seq, earlier.Seq)
	}
	pairA, pairB := results[6], results[len(cases)]
	if errs[len(cases)] != nil || pairA.Message.Seq != pairB.Message.Seq || pairA.Duplicate == pairB.Duplicate {
		t.Fatalf("same clientMsgId twice in one batch: %+v / %+v (%v)", pairA, pairB, errs[len(cases)])
	}
	// Gapless, one row per committed message, one outbox row each.
	for _, conv := range []int64{a.ID, b.ID} {
		last := queryInt(t, pool, "SELECT last_seq FROM conversation WHERE id = $1", conv)
		rows := queryInt(t, pool, "SELECT count(*) FROM message WHERE conversation_id = $1", conv)
		maxSeq := queryInt(t, pool, "SELECT COALESCE(max(seq),0) FROM message WHERE conversation_id = $1", conv)
		events := queryInt(t, pool, "SELECT count(*) FROM outbox WHERE type = 'message.new' AND msg_key = $1", fmt.Sprint(conv))
		if last != rows || maxSeq != rows || events != rows {
			t.Fatalf("conversation %d: last_seq %d, rows %d, max %d, events %d", conv, last, rows, maxSeq, events)
		}
	}
	if got := queryInt(t, pool, "SELECT count(*) FROM message WHERE conversation_id = $1", a.ID); got != 4 {
		t.Fatalf("conversation a has %d messages, want 4 (earlier, blocked, a1, a2)", got)
	}
	if got := queryInt(t, pool, "SELECT count(*) FROM message WHERE conversation_id = $1", b.ID); got != 3 {
		t.Fatalf("conversation b has %d messages, want 3 (b1, pair, b2)", got)
	}
	stats := st.BatchStats()
	if batches := stats.Batches - before.Batches; batches > 3 {
		t.Fatalf("%d transactions for %d sends: not batched", batches, stats.Messages-before.Messages)
	}
}

func TestLoneSendIsNotDelayedByBatching(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	batched := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = batched.Close(context.Background()) })
	direct := store.New(pool, chat.DefaultLimits(), store.WithBatching(0, 0))
	conv := mustGroup(t, direct, 1, 2)
	measure := func(st *store.Store) time.Duration {
		var best time.Duration
		for i := 0; i < 30; i++ {
			start := time.Now()
			if _, err := st.Send(ctx, sendReq(conv.ID, 1, "x")); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); best == 0 || d < best {
				best = d
			}
		}
		return best
	}
	measure(batched) // start the batcher
	d, b := measure(direct), measure(batched)
	t.Logf("lone send, best of 30: direct %v, group commit %v", d, b)
	if b > d+2*time.Millisecond {
		t.Fatalf("a lone send waits for batching: %v vs %v", b, d)
	}
}
