package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// sendMany sends n messages with a few goroutines; seqs are 1..n.
func sendMany(t *testing.T, st *store.Store, conv int64, senders []int64, n int) {
	t.Helper()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	per := n / len(senders)
	for i, sender := range senders {
		count := per
		if i == len(senders)-1 {
			count = n - per*(len(senders)-1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range count {
				if _, err := st.Send(ctx, sendReq(conv, sender, fmt.Sprintf("%d-%d", sender, j))); err != nil {
					t.Errorf("send: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func seqsOf(msgs []chat.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

func TestHistoryPagesVisitEachSeqOnceInOrder(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	conv := mustGroup(t, st, 1, 2)
	const total = 1000
	sendMany(t, st, conv.ID, []int64{1, 2}, total)

	// Backwards from the newest, as a client scrolling up.
	var back []int64
	before := int64(0)
	for {
		page := mustHistory(t, st, chat.HistoryQuery{ConversationID: conv.ID, UserID: 2, BeforeSeq: before, Limit: 37})
		if len(page) == 0 {
			break
		}
		seqs := seqsOf(page)
		if !slices.IsSorted(seqs) {
			t.Fatalf("page before %d is not ascending: %v", before, seqs)
		}
		if before != 0 && seqs[len(seqs)-1] != before-1 {
			t.Fatalf("page before %d ends at %d", before, seqs[len(seqs)-1])
		}
		back = append(slices.Clone(seqs), back...)
		before = seqs[0]
	}
	// Forwards, as a client filling a gap after reconnecting: the first
	// page comes from BeforeSeq, the rest from AfterSeq.
	first := mustHistory(t, st, chat.HistoryQuery{ConversationID: conv.ID, UserID: 1, BeforeSeq: 42, Limit: 41})
	fwd := seqsOf(first)
	for after := fwd[len(fwd)-1]; ; {
		page := mustHistory(t, st, chat.HistoryQuery{ConversationID: conv.ID, UserID: 1, AfterSeq: after, Limit: 41})
		if len(page) == 0 {
			break
		}
		seqs := seqsOf(page)
		if seqs[0] != after+1 || !slices.IsSorted(seqs) {
			t.Fatalf("page after %d: %v", after, seqs)
		}
		fwd = append(fwd, seqs...)
		after = seqs[len(seqs)-1]
	}
	for name, got := range map[string][]int64{"backwards": back, "forwards": fwd} {
		if len(got) != total {
			t.Fatalf("%s walk saw %d messages, want %d", name, len(got), total)
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("%s walk: position %d holds seq %d", name, i, s)
			}
		}
	}
}

func TestHistoryClampsTheLimit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	conv := mustGroup(t, st, 1)
	sendMany(t, st, conv.ID, []int64{1}, 300)
	for _, tc := range []struct {
		q         chat.HistoryQuery
		wantFirst int64
		wantLen   int
	}{
		{chat.HistoryQuery{Limit: 0}, 251, chat.DefaultHistoryLimit},
		{chat.HistoryQuery{Limit: -5}, 251, chat.DefaultHistoryLimit},
		{chat.HistoryQuery{Limit: 1000}, 101, chat.MaxHistoryLimit},
		{chat.HistoryQuery{Limit: 1000, AfterSeq: 50}, 51, chat.MaxHistoryLimit},
		{chat.HistoryQuery{AfterSeq: 290}, 291, 10},
		{chat.HistoryQuery{BeforeSeq: 11, Limit: 3}, 8, 3},
		{chat.HistoryQuery{BeforeSeq: 1}, 0, 0},
		{chat.HistoryQuery{AfterSeq: 300}, 0, 0},
	} {
		q := tc.q
		q.ConversationID, q.UserID = conv.ID, 1
		got := mustHistory(t, st, q)
		if len(got) != tc.wantLen || (tc.wantLen > 0 && got[0].Seq != tc.wantFirst) {
			t.Fatalf("%+v: got %d messages from seq %v, want %d from %d", q, len(got), seqsOf(got)[:min(1, len(got))], tc.wantLen, tc.wantFirst)
		}
		if got == nil {
			t.Fatalf("%+v: nil slice; an empty page must encode as []", q)
		}
	}
	for _, q := range []chat.HistoryQuery{{BeforeSeq: -1}, {AfterSeq: -1}, {BeforeSeq: 5, AfterSeq: 2}} {
		q.ConversationID, q.UserID = conv.ID, 1
		_, err := st.History(ctx, q)
		wantCode(t, fmt.Sprintf("history %+v", q), err, chat.CodeInvalid)
	}
}

func TestInboxShowsUnreadAndOrdersByLastMessage(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	a := mustGroup(t, st, 1, 2, 3)
	b := mustGroup(t, st, 1, 2)
	c := mustGroup(t, st, 1, 3)
	quiet := mustGroup(t, st, 1) // never gets a message: sorted by creation
	mustSend(t, st, a.ID, 1, "a1")
	mustSend(t, st, a.ID, 1, "a2")
	mustSend(t, st, a.ID, 1, "a3")
	mustSend(t, st, b.ID, 2, "b1")
	mustSend(t, st, b.ID, 2, "b2")
	mustSend(t, st, c.ID, 3, "c1")

	type row struct {
		id, unread, lastSeq int64
		body                string
	}
	inbox := func(user int64) []row {
		t.Helper()
		page, err := st.Inbox(ctx, user, 0, "")
		if err != nil {
			t.Fatalf("inbox of %d: %v", user, err)
		}
		if page.NextCursor != "" {
			t.Fatalf("inbox of %d: a single page has cursor %q", user, page.NextCursor)
		}
		var out []row
		for _, e := range page.Conversations {
			r := row{id: e.ID, unread: e.Unread, lastSeq: e.LastSeq}
			if e.LastMessage != nil {
				r.body = e.LastMessage.Body
				if e.LastMessage.Seq != e.LastSeq || e.LastMessageAt == nil || !e.LastMessage.CreatedAt.Equal(*e.LastMessageAt) {
					t.Fatalf("entry %d: last message %+v does not match lastSeq %d / lastMessageAt %v",
						e.ID, e.LastMessage, e.LastSeq, e.LastMessageAt)
				}
			} else if e.LastSeq != 0 || e.LastMessageAt != nil {
				t.Fatalf("entry %d has lastSeq %d but no last message", e.ID, e.LastSeq)
			}
			if e.Unread != e.LastSeq-e.LastReadSeq {
				t.Fatalf("entry %d: unread %d, lastSeq %d, lastReadSeq %d", e.ID, e.Unread, e.LastSeq, e.LastReadSeq)
			}
			out = append(out, r)
		}
		return out
	}
	want := func(user int64, want ...row) {
		t.Helper()
		if got := inbox(user); !slices.Equal(got, want) {
			t.Fatalf("inbox of %d:\n got %+v\nwant %+v", user, got, want)
		}
	}
	want(1, row{c.ID, 1, 1, "c1"}, row{b.ID, 2, 2, "b2"}, row{a.ID, 0, 3, "a3"}, row{quiet.ID, 0, 0, ""})
	want(2, row{b.ID, 0, 2, "b2"}, row{a.ID, 3, 3, "a3"})
	want(3, row{c.ID, 0, 1, "c1"}, row{a.ID, 3, 3, "a3"})

	mustMarkRead(t, ctx, st, a.ID, 2, 2)
	mustMarkRead(t, ctx, st, b.ID, 1, 1)
	want(2, row{b.ID, 0, 2, "b2"}, row{a.ID, 1, 3, "a3"})
	want(1, row{c.ID, 1, 1, "c1"}, row{b.ID, 1, 2, "b2"}, row{a.ID, 0, 3, "a3"}, row{quiet.ID, 0, 0, ""})

	// New activity moves a conversation to the top.
	mustSend(t, st, a.ID, 3, "a4")
	want(1, row{a.ID, 1, 4, "a4"}, row{c.ID, 1, 1, "c1"}, row{b.ID, 1, 2, "b2"}, row{quiet.ID, 0, 0, ""})
	want(2, row{a.ID, 2, 4, "a4"}, row{b.ID, 0, 2, "b2"})
	want(3, row{a.ID, 0, 4, "a4"}, row{c.ID, 0, 1, "c1"})

	// Nobody else sees any of it.
	want(99)
}

func TestInboxCursorPagesWithoutDuplicatesOrHoles(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const n = 120
	ids := make([]int64, n)
	for i := range n {
		if i%3 == 0 {
			ids[i] = mustGroup(t, st, 1, 2).ID // user 2 sees every third one
		} else {
			ids[i] = mustGroup(t, st, 1).ID
		}
	}
	// Messages in a random order, leaving ten conversations quiet.
	for _, i := range rand.Perm(n)[:n-10] {
		mustSend(t, st, ids[i], 1, "m")
	}
	// Thirty share one timestamp, so pages must break ties by id.
	tie := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	if _, err := pool.Exec(ctx, `UPDATE conversation SET last_message_at = $1 WHERE id = ANY($2)`,
		tie, ids[40:70]); err != nil {
		t.Fatal(err)
	}

	// The expected order, from the definition: last activity, then id, descending.
	rows, err := pool.Query(ctx, `SELECT id, COALESCE(last_message_at, created_at) FROM conversation`)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		id int64
		at time.Time
	}
	all := scanAll(t, rows, func(k *key) []any { return []any{&k.id, &k.at} })
	slices.SortFunc(all, func(x, y key) int {
		if c := y.at.Compare(x.at); c != 0 {
			return c
		}
		return int(y.id - x.id)
	})
	var want []int64
	for _, k := range all {
		want = append(want, k.id)
	}

	var got []int64
	cursor, pages := "", 0
	for {
		page, err := st.Inbox(ctx, 1, 7, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Conversations) > 7 {
			t.Fatalf("page %d holds %d entries", pages, len(page.Conversations))
		}
		for _, e := range page.Conversations {
			got = append(got, e.ID)
		}
		if page.NextCursor == "" {
			break
		}
		if pages > n {
			t.Fatal("cursor never ends")
		}
		cursor = page.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged inbox:\n got %v\nwant %v", got, want)
	}
	if want := (n + 6) / 7; pages != want {
		t.Fatalf("%d pages, want %d", pages, want)
	}

	// User 2 pages only through their own forty.
	var seen2 []int64
	cursor = ""
	for {
		page, err := st.Inbox(ctx, 2, 7, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Conversations {
			seen2 = append(seen2, e.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	var want2 []int64
	for _, id := range want {
		if slices.Index(ids, id)%3 == 0 {
			want2 = append(want2, id)
		}
	}
	if !slices.Equal(seen2, want2) {
		t.Fatalf("user 2's inbox:\n got %v\nwant %v", seen2, want2)
	}

	_, err = st.Inbox(ctx, 1, 7, "not a cursor")
	wantCode(t, "inbox with a forged cursor", err, chat.CodeInvalid)
	page, err := st.Inbox(ctx, 1, 1000, "")
	if err != nil || len(page.Conversations) != n || page.NextCursor != "" {
		t.Fatalf("inbox with limit 1000 (clamped to %d): %d entries, cursor %q, %v",
			chat.MaxInboxLimit, len(page.Conversations), page.NextCursor, err)
	}
}
