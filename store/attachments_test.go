package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// completeUpload records a complete upload of user's for conv: a PDF.
func completeUpload(t *testing.T, pool *pgxpool.Pool, user, conv int64) string {
	t.Helper()
	return completeUploadOf(t, pool, user, conv, "f.pdf", chat.UploadMeta{ContentType: "application/pdf", Size: 10, SHA256: "00"})
}

// completeUploadOf records a complete upload named name with what chatd
// read from its bytes, m.
func completeUploadOf(t *testing.T, pool *pgxpool.Pool, user, conv int64, name string, m chat.UploadMeta) string {
	t.Helper()
	ctx := testCtx(t)
	as := store.NewAttachments(pool)
	id := chat.NewUploadID()
	if err := as.CreateUpload(ctx, chat.UploadRecord{ID: id, BlobKey: chat.NewBlobKey(), UploaderID: user, ConversationID: conv,
		Name: name, DeclaredType: m.ContentType, DeclaredSize: m.Size, URLExpiresAt: time.Now().Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := as.CompleteUpload(ctx, id, m); !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	return id
}

func TestAnUploadIsAttachedOnceWhateverTheConcurrentSends(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	id := completeUpload(t, pool, 1, c.ID)
	errs := concurrently(20, func(int) error {
		_, err := st.Send(context.Background(), filesReq(c.ID, 1, "", []chat.AttachmentRef{{UploadID: id}}))
		return err
	})
	ok, dupe := tally(t, "send", errs, func(err error) bool { return isCode(err, chat.CodeConflict) })
	if ok != 1 || dupe != 19 {
		t.Fatalf("%d sends attached the upload, %d were refused; want 1 and 19", ok, dupe)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, c.ID); n != 1 {
		t.Fatalf("%d messages", n)
	}
}

func TestTheExpiryNeverDropsAnUploadASendIsAttaching(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	ctx := testCtx(t)
	sent, expired := 0, 0
	for i := 0; i < 40; i++ {
		id := completeUpload(t, pool, 1, c.ID)
		if _, err := pool.Exec(ctx, `UPDATE attachment SET created_at = now() - interval '2 days' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			sendErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, sendErr = st.Send(ctx, filesReq(c.ID, 1, "", []chat.AttachmentRef{{UploadID: id}}))
		}()
		go func() {
			defer wg.Done()
			// A send holding the row is skipped and seen attached on
			// the next round.
			for j := 0; j < 2; j++ {
				if _, err := as.ExpireUploads(ctx, time.Now().Add(-time.Hour), 0, 10); err != nil {
					t.Error(err)
				}
			}
		}()
		wg.Wait()
		switch {
		case sendErr == nil:
			sent++
		case isCode(sendErr, chat.CodeNotFound):
			expired++
		default:
			t.Fatalf("send: %v", sendErr)
		}
	}
	// Every message with files has them; every expired upload is queued.
	if n := queryInt(t, pool, `SELECT count(*) FROM message m WHERE m.msg_type IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM attachment a WHERE a.conversation_id = m.conversation_id AND a.seq = m.seq)`); n != 0 {
		t.Fatalf("%d messages lost their attachment to the expiry", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion`); n != int64(expired) {
		t.Fatalf("%d blobs queued, %d uploads expired", n, expired)
	}
	t.Logf("%d sent, %d expired first", sent, expired)
}

func TestEntriesReadAMessagesAttachmentsUntilItIsRecalled(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	ids := []string{completeUpload(t, pool, 1, c.ID), completeUpload(t, pool, 1, c.ID)}
	ctx := testCtx(t)
	res := mustSendFiles(t, st, c.ID, 1, "two files", []chat.AttachmentRef{{UploadID: ids[1], Caption: "second first"}, {UploadID: ids[0]}})
	ref := chat.MessageRef{ConversationID: c.ID, Seq: res.Seq}
	got, err := store.NewSessions(pool).Entries(ctx, []chat.MessageRef{ref})
	if err != nil {
		t.Fatal(err)
	}
	m := got[ref]
	if m.MsgType != chat.MsgFile || len(m.Attachments) != 2 || m.Attachments[0].ID != ids[1] ||
		m.Attachments[0].Caption != "second first" || m.Attachments[1].ID != ids[0] {
		t.Fatalf("entry: %+v", m)
	}
	hist, err := st.History(ctx, chat.HistoryQuery{ConversationID: c.ID, UserID: 2})
	if err != nil || len(hist) != 1 || len(hist[0].Attachments) != 2 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	mustChange(t, st, change(chat.KindRecall, c.ID, 1, ref.Seq))
	got, _ = store.NewSessions(pool).Entries(ctx, []chat.MessageRef{ref})
	if m := got[ref]; !m.Recalled || len(m.Attachments) != 0 || m.MsgType != "" {
		t.Fatalf("recalled entry: %+v", m)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE reason = 'recall'`); n != 2 {
		t.Fatalf("%d blobs queued by the recall, want 2", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE state = 'recalled' AND name = ''`); n != 2 {
		t.Fatalf("%d attachments recalled and erased, want 2", n)
	}
}

// TestARecalledMessageNoLongerTellsWhatKindItWas: a recalled photo or
// file reads as a recalled message and nothing more: no msgType in
// history, in the entries catch-up and the relay read, in the event of a
// message recalled before it was relayed, in the answer to a resend, nor
// in its row (erased with its body).
func TestARecalledMessageNoLongerTellsWhatKindItWas(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	ctx := testCtx(t)
	req := filesReq(c.ID, 1, "", []chat.AttachmentRef{{UploadID: completeUploadOf(t, pool, 1, c.ID, "a.jpg",
		chat.UploadMeta{ContentType: "image/jpeg", Size: 10, SHA256: "00", Width: 4, Height: 3})}})
	res, err := st.Send(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message.MsgType != chat.MsgImage {
		t.Fatalf("sent: msgType %q, want image", res.Message.MsgType)
	}
	seq := res.Message.Seq
	mustChange(t, st, change(chat.KindRecall, c.ID, 1, seq))

	ref := chat.MessageRef{ConversationID: c.ID, Seq: seq}
	got, err := store.NewSessions(pool).Entries(ctx, []chat.MessageRef{ref})
	if err != nil {
		t.Fatal(err)
	}
	if m := got[ref]; !m.Recalled || m.MsgType != "" {
		t.Errorf("entry: recalled %v, msgType %q; want recalled with none", m.Recalled, m.MsgType)
	}
	hist := mustHistory(t, st, chat.HistoryQuery{ConversationID: c.ID, UserID: 2})
	for _, m := range hist {
		if m.Seq == seq && (!m.Recalled || m.MsgType != "") {
			t.Errorf("history: recalled %v, msgType %q; want recalled with none", m.Recalled, m.MsgType)
		}
	}
	for _, ev := range outboxEvents(t, pool, c.ID, chat.EventMessageNew) {
		if ev.Seq == seq && (!ev.Recalled || ev.MsgType != "") {
			t.Errorf("message.new relayed after the recall: recalled %v, msgType %q; want recalled with none", ev.Recalled, ev.MsgType)
		}
	}
	again, err := st.Send(ctx, req)
	if err != nil || !again.Duplicate || again.Message.MsgType != "" {
		t.Errorf("resend: %+v %v, want a duplicate with no msgType", again, err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND msg_type IS NOT NULL`, c.ID); n != 0 {
		t.Errorf("%d rows keep a msg_type after the recall", n)
	}
}

func TestBlobDeletionsForgetOnlyWhatWasDeleted(t *testing.T) {
	_, pool := newStore(t)
	as := store.NewAttachments(pool)
	ctx := testCtx(t)
	for _, k := range []string{"aa/1", "bb/2", "cc/3"} {
		if err := as.QueueBlobDeletion(ctx, k, "test", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := as.QueueBlobDeletion(ctx, "dd/later", "test", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var seen []string
	n, err := as.DeleteBlobs(ctx, 10, func(_ context.Context, key string) error {
		seen = append(seen, key)
		if key == "bb/2" {
			return errors.New("store down")
		}
		return nil
	})
	if err != nil || n != 2 || len(seen) != 3 {
		t.Fatalf("DeleteBlobs: %d %v, saw %v", n, err, seen)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE blob_key = 'bb/2' AND attempts = 1 AND last_error = 'store down' AND not_before > now()`); n != 1 {
		t.Fatal("the failed deletion was not kept for a retry")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion`); n != 2 {
		t.Fatalf("%d deletions left, want the failed and the later one", n)
	}
	// A crash mid-deletion (the transaction ends without its commit)
	// forgets nothing.
	cctx, cancel := context.WithCancel(ctx)
	if _, err := pool.Exec(ctx, `UPDATE blob_deletion SET not_before = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	_, err = as.DeleteBlobs(cctx, 10, func(context.Context, string) error { cancel(); return context.Canceled })
	if err == nil {
		t.Fatal("a cancelled deletion round succeeded")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion`); n != 2 {
		t.Fatalf("an interrupted round forgot deletions: %d left", n)
	}
}

func TestTheDailyQuotaHoldsUnderConcurrentUploads(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	errs := concurrently(30, func(int) error {
		return as.CreateUpload(context.Background(), chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(),
			UploaderID: 1, ConversationID: c.ID, Name: "f", DeclaredType: "text/plain", DeclaredSize: 100,
			URLExpiresAt: time.Now().Add(time.Hour)}, 1000)
	})
	ok, over := tally(t, "create", errs, func(err error) bool {
		rl := chat.RateLimitOf(err)
		return rl != nil && rl.RetryAfter > 0
	})
	if ok != 10 || over != 20 {
		t.Fatalf("%d uploads fit a quota of 10, %d refused", ok, over)
	}
}

// TestAnUploadLargerThanTheWholeDailyQuotaIsTooLargeNotRetriedAtMidnight:
// a file that a whole day's quota could not hold is refused for good (413
// too_large, no Retry-After), not 429 "retry after midnight UTC", after
// which it would be refused again, and again: a client that trusts
// Retry-After would wait a day for nothing, every day.
func TestAnUploadLargerThanTheWholeDailyQuotaIsTooLargeNotRetriedAtMidnight(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	err := as.CreateUpload(testCtx(t), chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(),
		UploaderID: 1, ConversationID: c.ID, Name: "f", DeclaredType: "text/plain", DeclaredSize: 1001,
		URLExpiresAt: time.Now().Add(time.Hour)}, 1000)
	if chat.ErrorCode(err) != chat.CodeTooLarge || chat.RateLimitOf(err) != nil {
		t.Fatalf("a 1001-byte upload against a quota of 1000 bytes a day: %v (retry: %+v), want too_large with no retry", err, chat.RateLimitOf(err))
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM upload_quota`); n != 0 {
		t.Fatalf("%d quota rows: the refusal charged the day", n)
	}
	// One that fits the day's quota is still charged and accepted.
	if err := as.CreateUpload(testCtx(t), chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(),
		UploaderID: 1, ConversationID: c.ID, Name: "f", DeclaredType: "text/plain", DeclaredSize: 1000,
		URLExpiresAt: time.Now().Add(time.Hour)}, 1000); err != nil {
		t.Fatalf("an upload of exactly the day's quota: %v", err)
	}
}

// TestARecallQueuesItsBlobsOnceAndTheirDeletionSurvivesACrash: the recall
// and the queueing of its blobs are one transaction, so a crash leaves
// either both or neither; a resend of the recall, a second recall and a
// concurrent one queue nothing more; a deletion round cut after the blob
// store deleted (before its commit) is repeated whole, and deleting what
// is gone already is no error.
func TestARecallQueuesItsBlobsOnceAndTheirDeletionSurvivesACrash(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	ids := []string{completeUpload(t, pool, 1, c.ID), completeUpload(t, pool, 1, c.ID)}
	ctx := testCtx(t)
	res := mustSendFiles(t, st, c.ID, 1, "", []chat.AttachmentRef{{UploadID: ids[0]}, {UploadID: ids[1]}})
	recall := change(chat.KindRecall, c.ID, 1, res.Seq)
	errs := concurrently(4, func(i int) error {
		ch := recall
		if i > 1 { // two resends of the first, two recalls of their own
			ch.ClientMsgID = uuid.NewString()
		}
		_, err := st.Change(ctx, ch)
		return err
	})
	var ok int
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok == 0 {
		t.Fatalf("no recall succeeded: %v", errs)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE reason = 'recall'`); n != 2 {
		t.Fatalf("%d blobs queued by the recalls, want 2", n)
	}
	var keys []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(blob_key ORDER BY blob_key) FROM attachment WHERE id = ANY($1)`, ids).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE blob_deletion SET not_before = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	// The first round deletes in the store, then "crashes" before its
	// commit: the rows stay.
	as := store.NewAttachments(pool)
	deleted := map[string]int{}
	cctx, cancel := context.WithCancel(ctx)
	_, err := as.DeleteBlobs(cctx, 10, func(_ context.Context, key string) error {
		deleted[key]++
		if len(deleted) == len(keys) {
			cancel()
		}
		return nil
	})
	if err == nil {
		t.Fatal("a round cut before its commit succeeded")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion`); n != 2 {
		t.Fatalf("a round cut before its commit forgot deletions: %d left", n)
	}
	// The next rounds delete again (gone already: fine) and forget them;
	// the cut round's rows stay locked until PostgreSQL sees its
	// connection close, and SKIP LOCKED passes them meanwhile.
	total := 0
	for deadline := time.Now().Add(10 * time.Second); total < 2; {
		n, err := as.DeleteBlobs(ctx, 10, func(_ context.Context, key string) error { deleted[key]++; return nil })
		if err != nil {
			t.Fatalf("next round: %v", err)
		}
		total += n
		if total < 2 && time.Now().After(deadline) {
			t.Fatalf("the queued deletions were not done again: %d of 2", total)
		}
		if total < 2 {
			time.Sleep(20 * time.Millisecond) // a poll under a deadline
		}
	}
	for _, k := range keys {
		if deleted[k] != 2 {
			t.Fatalf("blob %s deleted %d times, want 2 (the cut round and the next): %v", k, deleted[k], deleted)
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion`); n != 0 {
		t.Fatalf("%d deletions left", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE id = ANY($1) AND state = 'recalled'`, ids); n != 2 {
		t.Fatalf("%d attachments recalled, want 2", n)
	}
}

// A forward made before the original's thumbnail exists copies its
// "pending" state; the copies name the same blob, and so the same
// thumbnail: recording it once makes every live copy's ready too, and none
// is left for the background sweep to render again.
func TestAThumbnailRecordedForAnImageIsItsForwardedCopiesToo(t *testing.T) {
	st, pool := newStore(t)
	ctx := testCtx(t)
	src, dst := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 3)
	as := store.NewAttachments(pool)
	id := completeUploadOf(t, pool, 1, src.ID, "p.png", chat.UploadMeta{ContentType: "image/png", Size: 10, SHA256: "00", Width: 40, Height: 30, Thumbnail: true})
	sent := mustSendFiles(t, st, src.ID, 1, "", []chat.AttachmentRef{{UploadID: id}})
	for range 2 {
		if _, err := st.Send(ctx, forwardReq(dst.ID, 1, src.ID, sent.Seq)); err != nil {
			t.Fatal(err)
		}
	}
	blob := `(SELECT blob_key FROM attachment WHERE id = $1)`
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE blob_key = `+blob+` AND thumb_state = 'pending'`, id); n != 3 {
		t.Fatalf("%d rows of the image pending a thumbnail, want the original and its 2 copies", n)
	}
	if live, err := as.SetThumbnail(ctx, id, blobOf(t, pool, id), &chat.Thumbnail{ContentType: "image/jpeg", Width: 40, Height: 30, Size: 500}); !live || err != nil {
		t.Fatalf("record the thumbnail: %v %v", live, err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE blob_key = `+blob+` AND thumb_state = 'ready' AND thumb_size = 500 AND thumb_width = 40`, id); n != 3 {
		t.Fatalf("%d rows of the image have the thumbnail, want 3", n)
	}
	if left, err := as.PendingThumbnails(ctx, 10); err != nil || len(left) != 0 {
		t.Fatalf("thumbnails still to make: %d %v", len(left), err)
	}
}

// Migration 0030 erases the type of the messages recalled before it, as a
// recall now does; the others keep theirs.
func TestMigration0030ErasesTheTypeOfMessagesRecalledBefore(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := freshPool(t)
	m30 := migrateBefore(t, ctx, pool, 30).SQL
	mustExec(t, ctx, pool, `
		INSERT INTO conversation (id, type) VALUES (1, 'GROUP');
		INSERT INTO message (conversation_id, seq, msg_no, sender_id, client_msg_id, body, created_at, msg_type, recalled_at)
		VALUES (1, 1, 1, 1, gen_random_uuid(), '', now(), 'image', now()),
		       (1, 2, 2, 1, gen_random_uuid(), '', now(), 'file', NULL),
		       (1, 3, 3, 1, gen_random_uuid(), '', now(), NULL, now())`)
	mustExec(t, ctx, pool, m30)
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(seq || ':' || COALESCE(msg_type, '-'), ' ' ORDER BY seq) FROM message`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "1:- 2:file 3:-"; got != want {
		t.Errorf("messages after 0030: %s, want %s", got, want)
	}
}

// blobOf is where upload id's bytes are.
func blobOf(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	return pgtest.QueryOne[string](t, pool, `SELECT blob_key FROM attachment WHERE id = $1`, id)
}

// imageUpload records a complete image of user's for conv, its thumbnail
// still to make; it answers its id and blob.
func imageUpload(t *testing.T, pool *pgxpool.Pool, user, conv int64) (id, key string) {
	t.Helper()
	id = completeUploadOf(t, pool, user, conv, "p.png", chat.UploadMeta{ContentType: "image/png", Size: 10, SHA256: "00", Width: 40, Height: 30, Thumbnail: true})
	return id, blobOf(t, pool, id)
}

var aThumbnail = &chat.Thumbnail{ContentType: "image/jpeg", Width: 40, Height: 30, Size: 500}

// An upload never sent expires (its row deleted, its blob queued and
// deleted) while its thumbnail is being made; the thumbnail lands after:
// recording it queues the blob again, so the thumbnail goes too.
func TestAThumbnailLandingAfterItsUploadExpiredIsDeletedToo(t *testing.T) {
	st, pool := newStore(t)
	ctx := testCtx(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	id, key := imageUpload(t, pool, 1, c.ID)
	if n, err := as.ExpireUploads(ctx, time.Now().Add(time.Hour), 0, 10); n != 1 || err != nil {
		t.Fatalf("expire: %d %v", n, err)
	}
	mustExec(t, ctx, pool, `UPDATE blob_deletion SET not_before = now() - interval '1 second'`)
	if n, err := as.DeleteBlobs(ctx, 10, func(context.Context, string) error { return nil }); n != 1 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	live, err := as.SetThumbnail(ctx, id, key, aThumbnail)
	if live || err != nil {
		t.Fatalf("a thumbnail of an expired upload was recorded: %v %v", live, err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE blob_key = $1`, key); n != 1 {
		t.Fatal("the blob of an expired upload was not queued again: its late thumbnail is never deleted")
	}
}

// A recalled image's blob is being deleted (the round holds its queue row,
// the files gone, not committed yet) when its thumbnail, made meanwhile,
// is recorded: the blob is queued again after the round, so the thumbnail
// written after the round deleted the files goes too.
func TestAThumbnailLandingWhileItsRecalledBlobIsBeingDeletedIsDeletedToo(t *testing.T) {
	st, pool := newStore(t)
	ctx := testCtx(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	id, key := imageUpload(t, pool, 1, c.ID)
	sent := mustSendFiles(t, st, c.ID, 1, "", []chat.AttachmentRef{{UploadID: id}})
	mustChange(t, st, change(chat.KindRecall, c.ID, 1, sent.Seq))
	mustExec(t, ctx, pool, `UPDATE blob_deletion SET not_before = now() - interval '1 second'`)
	recorded := make(chan error, 1)
	n, err := as.DeleteBlobs(ctx, 10, func(context.Context, string) error {
		// The blob store deleted the files; the thumbnail lands now.
		go func() {
			live, err := as.SetThumbnail(ctx, id, key, aThumbnail)
			if err == nil && live {
				err = errors.New("recorded as live")
			}
			recorded <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			select {
			case err := <-recorded:
				recorded <- err // answered without waiting for this round
				return nil
			default:
			}
			if pgtest.LockWaiters(t, pool) > 0 || time.Now().After(deadline) {
				return nil // waiting for this round's commit
			}
		}
	})
	if n != 1 || err != nil {
		t.Fatalf("delete: %d %v", n, err)
	}
	if err := <-recorded; err != nil {
		t.Fatalf("record the thumbnail: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE blob_key = $1`, key); n != 1 {
		t.Fatal("the recalled blob was not queued again: the thumbnail written after its deletion stays forever")
	}
}

// A file is forwarded, then both messages are recalled. The original's
// recall queued the blob; a deletion round finds the copy still live and
// is about to forget the queued row when the copy's recall commits: the
// blob is queued again after the round, not lost.
func TestRecallingTheLastCopyOfAFileWhileARoundKeepsItQueuesTheBlobAgain(t *testing.T) {
	st, pool := newStore(t)
	ctx := testCtx(t)
	src, dst := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 3)
	as := store.NewAttachments(pool)
	id := completeUpload(t, pool, 1, src.ID)
	key := blobOf(t, pool, id)
	sent := mustSendFiles(t, st, src.ID, 1, "", []chat.AttachmentRef{{UploadID: id}})
	fwd, err := st.Send(ctx, forwardReq(dst.ID, 1, src.ID, sent.Seq))
	if err != nil {
		t.Fatal(err)
	}
	recall := func(conv, seq int64) error {
		_, err := st.Change(ctx, change(chat.KindRecall, conv, 1, seq))
		return err
	}
	if err := recall(src.ID, sent.Seq); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, pool, `UPDATE blob_deletion SET not_before = now() - interval '1 second'`)
	// The round locks the row, sees the copy live, and is held just
	// before it forgets the row.
	release := pgtest.HoldBeforeDelete(t, ctx, pool, "blob_deletion")
	round := make(chan error, 1)
	go func() {
		_, err := as.DeleteBlobs(ctx, 10, func(context.Context, string) error { return errors.New("the copy is live: not deleted") })
		round <- err
	}()
	testkit.WaitFor(t, 5*time.Second, "the round to hold the row", func() bool { return pgtest.LockWaiters(t, pool) == 1 })
	recalled := make(chan error, 1)
	go func() { recalled <- recall(dst.ID, fwd.Message.Seq) }()
	testkit.WaitFor(t, 5*time.Second, "the copy's recall to commit or wait for the round", func() bool {
		select {
		case err := <-recalled:
			recalled <- err
			return true
		default:
			return pgtest.LockWaiters(t, pool) == 2
		}
	})
	release()
	if err := <-round; err != nil {
		t.Fatal(err)
	}
	if err := <-recalled; err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE blob_key = $1 AND state <> 'recalled'`, key); n != 0 {
		t.Fatalf("%d live rows", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE blob_key = $1`, key); n != 1 {
		t.Fatal("the blob of a file recalled everywhere is not queued: it is never deleted")
	}
}

// A file forwarded into two conversations is two rows naming one blob;
// both forwards recalled in one batch queue the blob once, and the batch
// does not fail for it (then to be retried one change at a time).
func TestRecallingTwoCopiesOfAFileInOneBatchQueuesTheBlobOnce(t *testing.T) {
	ctx := testCtx(t)
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithBatching(512, 1))
	src, other := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 4)
	dsts := []chat.Conversation{mustGroup(t, st, 1, 3), mustGroup(t, st, 1, 5)}
	id := completeUpload(t, pool, 1, src.ID)
	key := blobOf(t, pool, id)
	sent := mustSendFiles(t, st, src.ID, 1, "", []chat.AttachmentRef{{UploadID: id}})
	var copies []int64
	for _, dst := range dsts {
		fwd, err := st.Send(ctx, forwardReq(dst.ID, 1, src.ID, sent.Seq))
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, fwd.Message.Seq)
	}
	// The only transaction in flight waits for a lock the test holds, so
	// the two recalls queue and go in the next batch together.
	release := pgtest.LockConversation(t, ctx, pool, other.ID)
	blocked := make(chan error, 1)
	go func() { _, err := st.Send(ctx, sendReq(other.ID, 1, "blocked")); blocked <- err }()
	testkit.WaitFor(t, 10*time.Second, "the batch in flight to wait", func() bool { return pgtest.LockWaiters(t, pool) > 0 })
	before := st.BatchStats().Batches
	errs := make(chan error, len(copies))
	for i, seq := range copies {
		go func() {
			_, err := st.Change(ctx, change(chat.KindRecall, dsts[i].ID, 1, seq))
			errs <- err
		}()
	}
	testkit.WaitFor(t, 10*time.Second, "both recalls to queue", func() bool { return st.BatchStats().Queued == 2 })
	release()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for range copies {
		if err := <-errs; err != nil {
			t.Fatalf("recall: %v", err)
		}
	}
	if n := st.BatchStats().Batches - before; n != 2 {
		t.Fatalf("%d batches after the blocked one's start, want it and the recalls' one (a failed batch is retried change by change)", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE blob_key = $1 AND state = 'recalled'`, key); n != 2 {
		t.Fatalf("%d copies recalled, want 2", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion WHERE blob_key = $1`, key); n != 1 {
		t.Fatalf("the blob is queued %d times", n)
	}
}

// TestTheUploadQuotaMessageNamesAQuotaBelowOneMiBInItsOwnUnit: a day's
// quota under 1 MiB (a small deployment's, a test's) is told as it is,
// not as "at most 0 MiB per day".
func TestTheUploadQuotaMessageNamesAQuotaBelowOneMiBInItsOwnUnit(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	for i, want := range []string{"", "at most 1000 bytes per day"} {
		err := as.CreateUpload(testCtx(t), chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(),
			UploaderID: 1, ConversationID: c.ID, Name: "f", DeclaredType: "text/plain", DeclaredSize: 600,
			URLExpiresAt: time.Now().Add(time.Hour)}, 1000)
		if want == "" {
			if err != nil {
				t.Fatalf("upload %d: %v", i, err)
			}
			continue
		}
		if chat.ErrorCode(err) != chat.CodeRateLimited || !strings.Contains(err.Error(), want) {
			t.Fatalf("upload %d over a quota of 1000 bytes: %v; want rate_limited saying %q", i, err, want)
		}
	}
}
