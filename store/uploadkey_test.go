package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// TestRacingUploadTicketsWithOneKeyMakeOneUploadChargedOnce: ticket
// requests with one key at once (a retry sent while the first still
// runs) record one upload and charge its bytes once; each answers that
// upload, the first as created.
func TestRacingUploadTicketsWithOneKeyMakeOneUploadChargedOnce(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	as := store.NewAttachments(pool)
	ids, created := raceKeyedUploads(t, as, c.ID, 6, 1000, func() {})
	if len(ids) != 1 || created != 1 {
		t.Fatalf("racing requests with one key answered uploads %v, %d created; want one upload, created once", ids, created)
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM attachment`); got != 1 {
		t.Fatalf("%d uploads recorded, want 1", got)
	}
	if got := queryInt(t, pool, `SELECT bytes FROM upload_quota WHERE user_id = 1`); got != 40 {
		t.Fatalf("the day's bytes charged: %d, want 40", got)
	}
}

// TestRacingUploadTicketsWithOneKeyNearTheQuotaAllAnswerTheUpload: a
// retry racing with its first request, when the day's quota holds the
// file once but not twice, answers the upload the first made rather than
// 429: its own charge, waiting on the first's, is no upload of its own.
func TestRacingUploadTicketsWithOneKeyNearTheQuotaAllAnswerTheUpload(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	ctx := testCtx(t)
	as := store.NewAttachments(pool)
	const n = 6
	// The day's row held by another transaction, so that the requests
	// all wait on it, as a retry does on its first's charge.
	if _, err := pool.Exec(ctx, `INSERT INTO upload_quota (user_id, day, bytes, uploads) VALUES (1, (now() AT TIME ZONE 'UTC')::date, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM upload_quota WHERE user_id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ids, _ := raceKeyedUploads(t, as, c.ID, n, 50, func() {
		deadline := time.Now().Add(10 * time.Second)
		for queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%upload_quota%'`) < n {
			if time.Now().After(deadline) {
				t.Fatal("the requests never waited on the day's row")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if len(ids) != 1 {
		t.Fatalf("racing requests with one key answered uploads %v, want one", ids)
	}
	if got := queryInt(t, pool, `SELECT bytes FROM upload_quota WHERE user_id = 1`); got != 40 {
		t.Fatalf("the day's bytes charged: %d, want 40", got)
	}
}

// raceKeyedUploads sends n ticket requests of one user with one key at
// once (a retry sent while the first still runs), the day's quota
// dayBytes, calls meanwhile while they are in flight, and returns the
// uploads they answered and how many said they created theirs.
func raceKeyedUploads(t *testing.T, as *store.Attachments, conv int64, n int, dayBytes int64, meanwhile func()) (map[string]int, int) {
	t.Helper()
	ctx := testCtx(t)
	key := uuid.NewString()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]int{}
		created int
	)
	for range n {
		wg.Go(func() {
			rec, made, err := as.CreateKeyedUpload(ctx, chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(), UploaderID: 1,
				ConversationID: conv, Name: "a.txt", DeclaredType: "text/plain", DeclaredSize: 40, URLExpiresAt: time.Now().Add(time.Hour)}, key, dayBytes)
			if err != nil {
				t.Errorf("a request racing with one key: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[rec.ID]++
			if made {
				created++
			}
		})
	}
	meanwhile()
	wg.Wait()
	return ids, created
}

// TestAnUploadKeyAskedAgainByAUserWhoLeftTheConversationIsRefused: the
// upload a key made is not answered again to its uploader once they left
// its conversation, whether the key is looked up alone (before the rate
// is charged) or while recording a ticket (a retry racing with its
// first): not_member, as a new ticket.
func TestAnUploadKeyAskedAgainByAUserWhoLeftTheConversationIsRefused(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	ctx := testCtx(t)
	as := store.NewAttachments(pool)
	key := uuid.NewString()
	ask := func() chat.UploadRecord {
		return chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(), UploaderID: 2, Purpose: chat.PurposeMessage,
			ConversationID: c.ID, Name: "a.txt", DeclaredType: "text/plain", DeclaredSize: 40, URLExpiresAt: time.Now().Add(time.Hour)}
	}
	if _, made, err := as.CreateKeyedUpload(ctx, ask(), key, 0); err != nil || !made {
		t.Fatalf("ticket: %v, created %v", err, made)
	}
	if err := st.RemoveMember(ctx, c.ID, 2, 2); err != nil {
		t.Fatal(err)
	}
	if _, made, err := as.CreateKeyedUpload(ctx, ask(), key, 0); chat.ErrorCode(err) != chat.CodeNotMember {
		t.Errorf("the ticket asked again after leaving: %v, created %v; want not_member", err, made)
	}
	if _, found, err := as.UploadByKey(ctx, ask(), key); chat.ErrorCode(err) != chat.CodeNotMember {
		t.Errorf("the key looked up after leaving: %v, found %v; want not_member", err, found)
	}
}
