package store_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

func newReceipts(t *testing.T, st *store.Store, cfg store.ReceiptsConfig) *store.Receipts {
	t.Helper()
	r, err := store.NewReceipts(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("close receipts: %v", err)
		}
	})
	return r
}

type watermark struct{ read, delivered int64 }

func watermarks(t *testing.T, pool *pgxpool.Pool) map[[2]int64]watermark {
	t.Helper()
	rows, err := pool.Query(testCtx(t), `SELECT conversation_id, user_id, last_read_seq, last_delivered_seq FROM member_watermark`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[[2]int64]watermark{}
	for rows.Next() {
		var c, u int64
		var w watermark
		if err := rows.Scan(&c, &u, &w.read, &w.delivered); err != nil {
			t.Fatal(err)
		}
		out[[2]int64{c, u}] = w
	}
	return out
}

func commits(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	// Other backends report their counters when idle, at most once a
	// second: wait for them, then read a fresh snapshot.
	time.Sleep(1500 * time.Millisecond)
	var n int64
	err := pool.QueryRow(testCtx(t), `SELECT pg_stat_clear_snapshot(), xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(nil, &n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReceiptStormMatchesOneByOne: 10,000 read receipts from 1,000 users
// over 10 conversations, sent concurrently through Receipts, end with
// exactly the watermarks (and delivered watermarks) that applying them one
// by one with Store.MarkRead gives, in a small fraction of the
// transactions.
func TestReceiptStormMatchesOneByOne(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 receipts twice")
	}
	const (
		users    = 1000
		convs    = 10
		receipts = 10000
		msgs     = 50
	)
	var notified atomic.Int64
	rec := &publishRecorder{types: []string{chat.EventReadUpdated}, each: func(chat.Event) { notified.Add(1) }}
	batched, batchedPool := newStoreRecording(t, rec)
	serial, serialPool := newStore(t)
	members := make([]int64, 0, users-1)
	for u := int64(2); u <= users; u++ {
		members = append(members, u)
	}
	var ids [convs]int64
	for i := range convs {
		for _, st := range []*store.Store{batched, serial} {
			c := mustGroup(t, st, 1, members...)
			if ids[i] != 0 && ids[i] != c.ID {
				t.Fatalf("conversation ids differ between the databases")
			}
			ids[i] = c.ID
			for range msgs {
				mustSend(t, st, c.ID, 1+int64(i), "m") // users 1..10 each send in one
			}
		}
	}
	type receipt struct{ conv, user, seq int64 }
	rng := rand.New(rand.NewPCG(1, 2))
	all := make([]receipt, receipts)
	for i := range all {
		// Seqs past last_seq (50) check the clamp.
		all[i] = receipt{conv: ids[rng.IntN(convs)], user: int64(1 + i%users), seq: int64(1 + rng.IntN(msgs+10))}
	}

	reg := prometheus.NewRegistry()
	r := newReceipts(t, batched, store.ReceiptsConfig{Registerer: reg})
	before := commits(t, batchedPool)
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	// Every user has two devices sending at once (a reconnect storm).
	const devices = 2
	for d := range users * devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := d; i < receipts; i += users * devices {
				rc := all[i]
				res, err := r.MarkRead(context.Background(), rc.conv, rc.user, rc.seq)
				if err != nil {
					t.Errorf("mark read %+v: %v", rc, err)
					failed.Add(1)
					return
				}
				if res.LastReadSeq < min(rc.seq, msgs) {
					t.Errorf("receipt %+v answered lastReadSeq %d, below its own seq", rc, res.LastReadSeq)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		t.FailNow()
	}
	flushes := r.ReadFlushes()
	xacts := commits(t, batchedPool) - before
	merged := 0.0
	if mfs, err := reg.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() == "chat_receipts_merged_total" {
				merged = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
	}

	for _, rc := range all {
		if _, err := serial.MarkRead(testCtx(t), rc.conv, rc.user, rc.seq); err != nil {
			t.Fatalf("serial mark read %+v: %v", rc, err)
		}
	}
	got, want := watermarks(t, batchedPool), watermarks(t, serialPool)
	if len(got) != len(want) || len(got) != convs*users {
		t.Fatalf("%d and %d member rows, want %d", len(got), len(want), convs*users)
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("conversation %d user %d: batched %+v, one by one %+v", k[0], k[1], got[k], w)
		}
	}
	var batchedEvents, serialEvents int64
	q := `SELECT count(*) FROM outbox WHERE type = 'read.updated'`
	batchedEvents, serialEvents = queryInt(t, batchedPool, q), queryInt(t, serialPool, q)
	if batchedEvents > serialEvents || batchedEvents == 0 || batchedEvents != notified.Load() {
		t.Fatalf("read.updated: %d batched rows, %d notified, %d one by one", batchedEvents, notified.Load(), serialEvents)
	}
	t.Logf("%d receipts in %v: %d flush transactions, %d commits in pg_stat_database (%.1f%% of one per receipt), %v receipts merged; read.updated rows %d batched vs %d one by one",
		receipts, elapsed.Round(time.Millisecond), flushes, xacts, 100*float64(xacts)/receipts, merged, batchedEvents, serialEvents)
	if flushes >= receipts/5 || xacts >= receipts/5 {
		t.Fatalf("%d flushes, %d commits for %d receipts: want under 20%%", flushes, xacts, receipts)
	}
}

func TestReceiptsAnswerEachCaller(t *testing.T) {
	t.Parallel()
	rec := &publishRecorder{types: []string{chat.EventReadUpdated, chat.EventDeliveryUpdated}}
	st, pool := newStoreRecording(t, rec)
	conv := mustGroup(t, st, 1, 2, 3)
	sendN(t, st, conv.ID, 1, 5, "m")
	r := newReceipts(t, st, store.ReceiptsConfig{})
	ctx := testCtx(t)

	res, err := r.MarkRead(ctx, conv.ID, 2, 3)
	if err != nil || res != (chat.ReadResult{Advanced: true, LastReadSeq: 3}) {
		t.Fatalf("first receipt: %+v %v", res, err)
	}
	res, err = r.MarkRead(ctx, conv.ID, 2, 2)
	if err != nil || res != (chat.ReadResult{Advanced: false, LastReadSeq: 3}) {
		t.Fatalf("older receipt: %+v %v", res, err)
	}
	res, err = r.MarkRead(ctx, conv.ID, 2, 99)
	if err != nil || res != (chat.ReadResult{Advanced: true, LastReadSeq: 5}) {
		t.Fatalf("receipt past the end: %+v %v", res, err)
	}
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != 5 || m.LastDeliveredSeq != 5 {
		t.Fatalf("member 2 after reading: %+v (reading delivers)", m)
	}
	_, err = r.MarkRead(ctx, conv.ID, 9, 1)
	wantCode(t, "receipt of a non-member", err, chat.CodeNotMember)
	_, err = r.MarkRead(ctx, conv.ID+100, 2, 1)
	wantCode(t, "receipt for an unknown conversation", err, chat.CodeNotFound)
	_, err = r.MarkRead(ctx, conv.ID, 2, 0)
	wantCode(t, "receipt for seq 0", err, chat.CodeInvalid)

	reads := outboxEvents(t, pool, conv.ID, chat.EventReadUpdated)
	if len(reads) != 2 || reads[0].Seq != 3 || reads[1].Seq != 5 {
		t.Fatalf("read.updated rows %+v, want seqs 3 and 5 (only for receipts that advanced)", reads)
	}
	if reads[0].LastSeq != 5 || reads[1].LastSeq != 5 {
		t.Fatalf("read.updated rows' lastSeq: %d and %d, want 5 (the conversation's last_seq)", reads[0].LastSeq, reads[1].LastSeq)
	}
	if n := len(rec.events()); n != 2 {
		t.Fatalf("%d events notified, want 2", n)
	}

	// Concurrent receipts of one member merge; each caller gets the result
	// of applying them one by one, and one read.updated is written per batch.
	var wg sync.WaitGroup
	results := make([]chat.ReadResult, 3)
	for i, seq := range []int64{1, 4, 5} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if results[i], err = r.MarkRead(ctx, conv.ID, 3, seq); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, res := range results {
		if res.LastReadSeq < []int64{1, 4, 5}[i] || res.LastReadSeq > 5 {
			t.Errorf("merged receipt %d: %+v", i, res)
		}
	}
	if m := member(t, st, conv.ID, 1, 3); m.LastReadSeq != 5 {
		t.Fatalf("member 3 watermark %d, want 5", m.LastReadSeq)
	}
	if r.Pending(conv.ID, 3) {
		t.Fatal("nothing should be pending after the callers returned")
	}
}

func TestDeliveredWatermarkIsBatchedMonotonicAndClamped(t *testing.T) {
	t.Parallel()
	rec := &publishRecorder{types: []string{chat.EventReadUpdated, chat.EventDeliveryUpdated}}
	st, pool := newStoreRecording(t, rec)
	conv := mustGroup(t, st, 1, 2, 3)
	sendN(t, st, conv.ID, 1, 4, "m")
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 500 * time.Millisecond})
	events := rec.events

	// The first ack is flushed at once; the ones after it wait out the
	// interval together.
	r.Delivered(conv.ID, 1, 4) // the sender's own device: read already, no event
	waitFor(t, "the first delivered flush", func() bool { return r.DeliveredFlushes() == 1 })
	// Acks of one member arrive out of order and per device; one flush
	// keeps the highest.
	for _, seq := range []int64{1, 3, 2, 3} {
		r.Delivered(conv.ID, 2, seq)
	}
	waitFor(t, "delivered flush", func() bool { return member(t, st, conv.ID, 1, 2).LastDeliveredSeq == 3 })
	if m := member(t, st, conv.ID, 1, 2); m.LastReadSeq != 0 {
		t.Fatalf("delivery moved the read watermark: %+v", m)
	}
	// Backwards and past the end.
	r.Delivered(conv.ID, 2, 1)
	r.Delivered(conv.ID, 3, 99)
	waitFor(t, "clamped delivered", func() bool { return member(t, st, conv.ID, 1, 3).LastDeliveredSeq == 4 })
	if m := member(t, st, conv.ID, 1, 2); m.LastDeliveredSeq != 3 {
		t.Fatalf("delivered watermark moved back to %d", m.LastDeliveredSeq)
	}
	rows := outboxEvents(t, pool, conv.ID, chat.EventDeliveryUpdated)
	if len(rows) != 2 || rows[0].UserID != 2 || rows[0].Seq != 3 || rows[1].UserID != 3 || rows[1].Seq != 4 ||
		rows[0].SenderID != 1 || rows[1].SenderID != 1 {
		t.Fatalf("delivery.updated rows %+v, want user 2 at 3 and user 3 at 4, both for sender 1", rows)
	}
	if rows[0].LastSeq != 4 || rows[1].LastSeq != 4 {
		t.Fatalf("delivery.updated rows' lastSeq: %d and %d, want 4 (the conversation's last_seq)", rows[0].LastSeq, rows[1].LastSeq)
	}
	// Messages of two senders delivered at once: one event for each.
	mustSend(t, st, conv.ID, 3, "from 3") // seq 5
	mustSend(t, st, conv.ID, 1, "from 1") // seq 6
	r.Delivered(conv.ID, 2, 6)
	waitFor(t, "two senders", func() bool { return len(outboxEvents(t, pool, conv.ID, chat.EventDeliveryUpdated)) == 4 })
	rows = outboxEvents(t, pool, conv.ID, chat.EventDeliveryUpdated)[2:]
	if rows[0].UserID != 2 || rows[0].Seq != 6 || rows[1].UserID != 2 || rows[1].Seq != 6 || rows[0].SenderID+rows[1].SenderID != 4 {
		t.Fatalf("delivery.updated over two senders: %+v", rows)
	}
	waitFor(t, "notified", func() bool { return len(events()) == 4 })
	if r.DeliveredFlushes() > 5 {
		t.Fatalf("%d delivered flushes for three bursts", r.DeliveredFlushes())
	}
	seen, err := st.SeenBy(testCtx(t), conv.ID, 1, 3)
	// User 3 sent seq 5, so it has read up to it.
	if err != nil || seen != (chat.SeenResult{SeenBy: 1, DeliveredTo: 2, Members: 2}) {
		t.Fatalf("seen %+v %v", seen, err)
	}
	// User 1's view: 2 has everything (6), 3 has up to 5 (its own 5 counts
	// as read), so the lowest is 5.
	page, err := st.HistoryPage(testCtx(t), chat.HistoryQuery{ConversationID: conv.ID, UserID: 1})
	if err != nil || page.DeliveredSeq != 5 || page.ReadSeq != 0 || len(page.Messages) != 6 {
		t.Fatalf("history page watermarks delivered %d read %d (%d messages), %v", page.DeliveredSeq, page.ReadSeq, len(page.Messages), err)
	}
	inbox, err := st.Inbox(testCtx(t), 1, 10, "")
	if err != nil || len(inbox.Conversations) != 1 || inbox.Conversations[0].DeliveredSeq != 5 || inbox.Conversations[0].ReadSeq != 0 {
		t.Fatalf("inbox %+v %v", inbox, err)
	}
}
