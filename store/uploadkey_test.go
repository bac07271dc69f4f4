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
	ctx := testCtx(t)
	as := store.NewAttachments(pool)
	key := uuid.NewString()
	const n = 6
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]int{}
		created int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, made, err := as.CreateKeyedUpload(ctx, chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(), UploaderID: 1,
				ConversationID: c.ID, Name: "a.txt", DeclaredType: "text/plain", DeclaredSize: 40, URLExpiresAt: time.Now().Add(time.Hour)}, key, 1000)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[rec.ID]++
			if made {
				created++
			}
		}()
	}
	wg.Wait()
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
