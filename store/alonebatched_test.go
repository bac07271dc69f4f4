package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// The same changes, in the same order, committed one at a time in one
// database and together in one batch in another, get the same answers and
// leave the same rows: what a change does never depends on its batch.
// (Each refers to entries committed before it: a batch's changes are
// judged against the committed state, and a client learns a seq only
// once its entry committed.)
func TestAChangeInAMixedBatchIsAnsweredAndStoredAsWhenAlone(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	seedID, seedB, blockerID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	msg := func(conv, user int64, id string) chat.Change {
		return chat.Change{Kind: chat.KindMessage, ConversationID: conv, UserID: user, ClientMsgID: id, Body: "b " + id[:4]}
	}
	fwd := func(conv, user, from, seq int64) chat.Change {
		c := msg(conv, user, uuid.NewString())
		c.Body, c.Forward = "", &chat.MessageRef{ConversationID: from, Seq: seq}
		return c
	}
	reply := func(conv, user, to int64) chat.Change {
		c := msg(conv, user, uuid.NewString())
		c.ReplyTo = to
		return c
	}
	setUp := func() (*store.Store, *pgxpool.Pool, int64, int64) {
		st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithBatching(512, 1))
		a, b := mustGroup(t, st, 1, 2), mustGroup(t, st, 3, 4)
		mustChange(t, st, msg(a.ID, 1, seedID))
		mustChange(t, st, msg(b.ID, 3, seedB))
		return st, pool, a.ID, b.ID
	}
	alone, alonePool, a, b := setUp()
	batched, batchedPool, a2, b2 := setUp()
	if a != a2 || b != b2 {
		t.Fatalf("set-ups differ: %d %d / %d %d", a, b, a2, b2)
	}
	repeated := msg(a, 1, uuid.NewString())
	changes := []chat.Change{
		repeated,
		msg(a, 1, uuid.NewString()),
		reply(a, 2, 1),
		reply(a, 2, 99),
		fwd(a, 1, b, 1), // 1 is not in b
		fwd(b, 3, b, 1),
		msg(a, 1, seedID), // a resend
		msg(a, 2, seedID), // another sender's clientMsgId
		msg(a, 3, uuid.NewString()),
		fwd(a, 2, a, 1),
		reply(b, 4, 1),
		fwd(b, 4, b, 1),
		reply(a, 1, 2),
		msg(b, 4, uuid.NewString()),
		repeated, // a resend within the batch
	}
	blocker := msg(a, 2, blockerID)

	outcome := func(res chat.ChangeResult, err error) string {
		if err != nil {
			return fmt.Sprint("refused ", err)
		}
		return fmt.Sprintf("seq %d dup %v body %q", res.Entry.Seq, res.Duplicate, res.Entry.Body)
	}
	var want []string
	mustChange(t, alone, blocker)
	for _, c := range changes {
		want = append(want, outcome(alone.Change(ctx, c)))
	}

	release := pgtest.LockConversation(t, ctx, batchedPool, a)
	blocked := make(chan error, 1)
	go func() { _, err := batched.Change(ctx, blocker); blocked <- err }()
	waitFor(t, "the blocker waits for the lock", func() bool { return pgtest.LockWaiters(t, batchedPool) > 0 })
	before := batched.BatchStats()
	got := make([]string, len(changes))
	answered := make(chan struct{}, len(changes))
	for i, c := range changes {
		batched.SubmitChange(ctx, c, func(res chat.ChangeResult, err error) { got[i] = outcome(res, err); answered <- struct{}{} })
	}
	waitFor(t, "the changes queue", func() bool { return batched.BatchStats().Queued == len(changes) })
	release()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for range changes {
		<-answered
	}
	if n := batched.BatchStats().Batches - before.Batches; n != 2 {
		t.Fatalf("%d transactions, want the blocker's and one batch", n)
	}
	for i := range changes {
		if got[i] != want[i] {
			t.Errorf("change %d: in a batch %s, alone %s", i, got[i], want[i])
		}
	}
	if a, b := dumpEntries(t, ctx, alonePool), dumpEntries(t, ctx, batchedPool); a != b {
		t.Errorf("stored alone:\n%s\nin a batch:\n%s", a, b)
	}
}

// dumpEntries is every entry's stored columns, one line each.
func dumpEntries(t *testing.T, ctx context.Context, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(ctx, `SELECT string_agg(format('%s:%s %s by %s %s %L reply %s fwd %s/%s/%s no %s',
		conversation_id, seq, kind, sender_id, client_msg_id, body, reply_to, forwarded_conversation_id, forwarded_seq,
		forwarded_sender_id, msg_no), E'\n' ORDER BY conversation_id, seq) FROM message`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
