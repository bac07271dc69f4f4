package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

func TestSendConcurrentSendersGetGaplessUniqueSeqs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const senders, perSender = 50, 200
	others := make([]int64, 0, senders-1)
	for u := int64(2); u <= senders; u++ {
		others = append(others, u)
	}
	conv := mustGroup(t, st, 1, others...)

	seqs := make([][]int64, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sender := int64(g + 1)
			for i := range perSender {
				res, err := st.Send(ctx, sendReq(conv.ID, sender, fmt.Sprintf("m %d/%d", sender, i)))
				if err != nil {
					t.Errorf("sender %d message %d: %v", sender, i, err)
					return
				}
				seqs[g] = append(seqs[g], res.Message.Seq)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	const total = senders * perSender
	seen := make(map[int64]bool, total)
	for g, ss := range seqs {
		for i, s := range ss {
			if seen[s] {
				t.Fatalf("seq %d returned twice", s)
			}
			seen[s] = true
			// One sender's messages are ordered as it sent them.
			if i > 0 && s <= ss[i-1] {
				t.Fatalf("sender %d got seq %d after %d", g+1, s, ss[i-1])
			}
		}
	}
	for s := int64(1); s <= total; s++ {
		if !seen[s] {
			t.Fatalf("seq %d was never returned", s)
		}
	}
	// The table agrees: exactly 1..total, no gaps, no duplicates.
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, conv.ID); n != total {
		t.Fatalf("%d messages stored, want %d", n, total)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM (
		SELECT seq, row_number() OVER (ORDER BY seq) AS rn FROM message WHERE conversation_id = $1) s
		WHERE seq <> rn`, conv.ID); n != 0 {
		t.Fatalf("%d messages out of the 1..n sequence", n)
	}
	if n := queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv.ID); n != total {
		t.Fatalf("last_seq = %d, want %d", n, total)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM outbox WHERE msg_key = $1 AND type = 'message.new'`,
		fmt.Sprint(conv.ID)); n != total {
		t.Fatalf("%d message.new outbox rows, want %d", n, total)
	}
	if n := queryInt(t, pool, `SELECT count(DISTINCT seq) FROM outbox
		WHERE msg_key = $1 AND type = 'message.new'`, fmt.Sprint(conv.ID)); n != total {
		t.Fatalf("outbox holds %d distinct seqs, want %d", n, total)
	}
}

func TestSendSameClientMsgIDConcurrentlyCommitsOnce(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	mustSend(t, st, conv.ID, 2, "before") // so the contested message is not seq 1 by luck

	const callers = 20
	req := sendReq(conv.ID, 1, "contested")
	results := make([]chat.SendResult, callers)
	errs := concurrently(callers, func(i int) error {
		var err error
		results[i], err = st.Send(ctx, req)
		return err
	})

	dups := 0
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if results[i].Message.Seq != 2 {
			t.Fatalf("caller %d got seq %d, want 2", i, results[i].Message.Seq)
		}
		if results[i].Message.Body != "contested" || results[i].Message.SenderID != 1 ||
			results[i].Message.ClientMsgID != req.ClientMsgID || results[i].Message.CreatedAt.IsZero() {
			t.Fatalf("caller %d got %+v", i, results[i].Message)
		}
		if !results[i].Message.CreatedAt.Equal(results[0].Message.CreatedAt) {
			t.Fatalf("callers disagree on createdAt: %v vs %v", results[i].Message.CreatedAt, results[0].Message.CreatedAt)
		}
		if results[i].Duplicate {
			dups++
		}
	}
	if dups != callers-1 {
		t.Fatalf("%d callers saw Duplicate, want %d", dups, callers-1)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND client_msg_id = $2`,
		conv.ID, req.ClientMsgID); n != 1 {
		t.Fatalf("%d messages with the clientMsgId, want 1", n)
	}
	if evs := outboxEvents(t, pool, conv.ID, chat.EventMessageNew); len(evs) != 2 {
		t.Fatalf("%d message.new events, want 2", len(evs))
	}
	if n := queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv.ID); n != 2 {
		t.Fatalf("last_seq = %d, want 2", n)
	}
	// Send retries a unique violation on this constraint by name; renaming
	// it in a migration would silently turn that race into a 500.
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_constraint
		WHERE conname = 'message_conversation_id_client_msg_id_key' AND contype = 'u'`); n != 1 {
		t.Fatal("the unique (conversation_id, client_msg_id) constraint has another name")
	}
}

func TestSendClientMsgIDOfAnotherSenderIsConflict(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	req := sendReq(conv.ID, 1, "mine")
	if _, err := st.Send(ctx, req); err != nil {
		t.Fatal(err)
	}
	stolen := req
	stolen.SenderID, stolen.Body = 2, "yours?"
	_, err := st.Send(ctx, stolen)
	wantCode(t, "reuse by another sender", err, chat.CodeConflict)

	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, conv.ID); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	if n := queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv.ID); n != 1 {
		t.Fatalf("last_seq = %d, want 1", n)
	}
	if evs := outboxEvents(t, pool, conv.ID, chat.EventMessageNew); len(evs) != 1 {
		t.Fatalf("%d message.new events, want 1", len(evs))
	}
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != 0 {
		t.Fatalf("conflicting sender's watermark moved to %d", m.LastReadSeq)
	}
	// The rightful sender still gets the original back.
	res, err := st.Send(ctx, req)
	if err != nil || !res.Duplicate || res.Message.Seq != 1 || res.Message.Body != "mine" {
		t.Fatalf("resend by the owner: %+v, %v", res, err)
	}
}

func TestSendReturnsTheCommittedMessageAndEvent(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	// A non-canonical (upper case) UUID is stored and returned canonically.
	id := uuid.New()
	res, err := st.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 2,
		ClientMsgID: strings.ToUpper(id.String()), Body: "héllo"})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Message
	if res.Duplicate || m.ConversationID != conv.ID || m.Seq != 1 || m.SenderID != 2 ||
		m.ClientMsgID != id.String() || m.Body != "héllo" || m.CreatedAt.IsZero() {
		t.Fatalf("send returned %+v", res)
	}
	hist := mustHistory(t, st, chat.HistoryQuery{ConversationID: conv.ID, UserID: 1})
	if len(hist) != 1 || !sameMessage(hist[0], m) {
		t.Fatalf("history %+v, send returned %+v", hist, m)
	}
	c, err := st.GetConversation(ctx, conv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.LastSeq != 1 || c.LastMessageAt == nil || !c.LastMessageAt.Equal(m.CreatedAt) {
		t.Fatalf("conversation after send: lastSeq %d lastMessageAt %v, message at %v", c.LastSeq, c.LastMessageAt, m.CreatedAt)
	}
	evs := outboxEvents(t, pool, conv.ID, chat.EventMessageNew)
	if len(evs) != 1 {
		t.Fatalf("%d message.new events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Seq != 1 || ev.SenderID != 2 || ev.ClientMsgID != m.ClientMsgID || ev.Body == nil || *ev.Body != "héllo" ||
		ev.CreatedAt == nil || !ev.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("outbox event %+v does not describe %+v", ev, m)
	}
	// Messages are timestamped in seq order.
	prev := m
	for i := range 20 {
		next := mustSend(t, st, conv.ID, 1, fmt.Sprint(i))
		if next.CreatedAt.Before(prev.CreatedAt) {
			t.Fatalf("seq %d created at %v, before seq %d at %v", next.Seq, next.CreatedAt, prev.Seq, prev.CreatedAt)
		}
		prev = next
	}
}

func TestSendRejectsMalformedInputAsInvalid(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	conv := mustGroup(t, st, 1)
	for name, req := range map[string]chat.SendRequest{
		"malformed uuid": {ConversationID: conv.ID, SenderID: 1, ClientMsgID: "not-a-uuid", Body: "x"},
		"missing uuid":   {ConversationID: conv.ID, SenderID: 1, Body: "x"},
		"NUL in body":    {ConversationID: conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "a\x00b"},
		"bad UTF-8":      {ConversationID: conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "\xff"},
		"empty body":     {ConversationID: conv.ID, SenderID: 1, ClientMsgID: uuid.NewString()},
		"zero sender":    {ConversationID: conv.ID, ClientMsgID: uuid.NewString(), Body: "x"},
	} {
		_, err := st.Send(ctx, req)
		wantCode(t, name, err, chat.CodeInvalid)
	}
	_, err := st.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(),
		Body: strings.Repeat("x", chat.DefaultMaxBodyBytes+1)})
	wantCode(t, "oversize body", err, chat.CodeTooLarge)
	if n := queryInt(t, pool, `SELECT count(*) FROM message`); n != 0 {
		t.Fatalf("%d messages written by rejected sends", n)
	}
}

// installOutboxTrap makes message inserts fail for body "explode" and wait on
// advisory lock 4242 for body "hold", from a trigger after the row is
// inserted: a send's transaction can then be made to fail, or be held
// open, after its message row is inserted.
func installOutboxTrap(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION test_outbox_trap() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.body = 'explode' THEN
				RAISE EXCEPTION 'test trap: outbox insert refused';
			END IF;
			IF NEW.body = 'hold' THEN
				PERFORM pg_advisory_xact_lock_shared(4242);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_outbox_trap AFTER INSERT ON message
			FOR EACH ROW EXECUTE FUNCTION test_outbox_trap();`)
	if err != nil {
		t.Fatalf("install outbox trap: %v", err)
	}
}

func TestSendFailingBeforeCommitLeavesNoMessageEventOrGap(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	installOutboxTrap(t, ctx, pool)
	sendN(t, st, conv.ID, 1, 3, "ok")
	failed := sendReq(conv.ID, 2, "explode")
	_, err := st.Send(ctx, failed)
	if err == nil {
		t.Fatal("send with a failing outbox insert succeeded")
	}
	if isCode(err, chat.CodeUnavailable) || isCode(err, chat.CodeInvalid) {
		t.Fatalf("a failing trigger is a server fault, got %v", err)
	}

	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, conv.ID); n != 3 {
		t.Fatalf("%d messages after the failed send, want 3", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE client_msg_id = $1`, failed.ClientMsgID); n != 0 {
		t.Fatal("the failed message is stored")
	}
	if n := queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv.ID); n != 3 {
		t.Fatalf("last_seq = %d after the failed send, want 3", n)
	}
	if n := len(outboxEvents(t, pool, conv.ID, chat.EventMessageNew)); n != 3 {
		t.Fatalf("%d message.new events after the failed send, want 3", n)
	}
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != 0 {
		t.Fatalf("failed sender's watermark moved to %d", m.LastReadSeq)
	}
	// No gap: the next message is 4, and the failed clientMsgId is free.
	if m := mustSend(t, st, conv.ID, 2, "next"); m.Seq != 4 {
		t.Fatalf("next send got seq %d, want 4", m.Seq)
	}
	failed.Body = "retried"
	res, err := st.Send(ctx, failed)
	if err != nil || res.Duplicate || res.Message.Seq != 5 {
		t.Fatalf("retrying the failed clientMsgId: %+v, %v", res, err)
	}
}

func TestSendIsInvisibleUntilCommit(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	installOutboxTrap(t, ctx, pool)
	mustSend(t, st, conv.ID, 1, "first")

	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res chat.SendResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := st.Send(ctx, sendReq(conv.ID, 1, "hold"))
		done <- result{res, err}
	}()
	// The send is parked inside its transaction, message row inserted.
	waitFor(t, "the send to wait on the trap", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 1
	})

	hist, err := st.History(ctx, chat.HistoryQuery{ConversationID: conv.ID, UserID: 2})
	if err != nil || len(hist) != 1 {
		t.Fatalf("history during the open send: %d messages, %v; want only the first", len(hist), err)
	}
	page, err := st.Inbox(ctx, 2, 10, "")
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].Unread != 1 || page.Conversations[0].LastSeq != 1 {
		t.Fatalf("inbox during the open send: %+v, %v", page, err)
	}
	if n := len(outboxEvents(t, pool, conv.ID, chat.EventMessageNew)); n != 1 {
		t.Fatalf("%d message.new events visible before commit, want 1", n)
	}

	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res.Message.Seq != 2 {
		t.Fatalf("held send: %+v, %v", r.res, r.err)
	}
	hist, err = st.History(ctx, chat.HistoryQuery{ConversationID: conv.ID, UserID: 2})
	if err != nil || len(hist) != 2 || hist[1].Body != "hold" {
		t.Fatalf("history after commit: %+v, %v", hist, err)
	}
	if n := len(outboxEvents(t, pool, conv.ID, chat.EventMessageNew)); n != 2 {
		t.Fatalf("%d message.new events after commit, want 2", n)
	}
}
