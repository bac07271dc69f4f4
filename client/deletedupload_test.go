package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/server"
)

// deleteAsExpired deletes user 1's pending upload as chatd's sweep does
// an upload older than upload_ttl (made older here), while its URL is
// still valid: an upload_ttl shorter than the URL's life. It returns the
// upload's id.
func deleteAsExpired(t *testing.T, srv *server.Server) string {
	t.Helper()
	id := pendingUpload(t, srv)
	if _, err := srv.Pool.Exec(context.Background(), `UPDATE attachment SET created_at = now() - interval '30 days' WHERE id = $1`, id); err != nil {
		t.Errorf("age upload %s: %v", id, err)
	}
	srv.Attachments.Sweep()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM attachment WHERE id = $1`, id).Scan(&n); err != nil || n != 0 {
		t.Errorf("upload %s still there after the sweep (%d rows, %v)", id, n, err)
	}
	return id
}

// TestAnObjectStoreUploadDeletedWhileItsURLIsValidTakesANewTicket: the
// store took the bytes, its answer lost, and chatd deleted the upload
// (its upload_ttl past) while the URL was still valid. The next
// attempt's completion answers that the upload is gone; Upload takes a
// new ticket and sends the file there, rather than PUT it again to the
// deleted upload's URL, which the store still took, and whose completion
// then failed the Upload with not_found (its caller's retry uploading
// and charging the file once more). The file is returned as the new
// upload, which a message carries.
func TestAnObjectStoreUploadDeletedWhileItsURLIsValidTakesANewTicket(t *testing.T) {
	t.Parallel()
	var deletedID atomic.Value
	srv, puts := storeTookItAnswerLost(t, false, func(srv *server.Server) { deletedID.Store(deleteAsExpired(t, srv)) })
	g := groupOf12(t, srv)
	alice := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	ctx := ctxFor(t, 30*time.Second)
	data := []byte("the minutes of the meeting, their first upload deleted\n")
	a, err := alice.Upload(ctx, g.ID, "minutes.txt", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload whose upload chatd deleted while its URL was valid: %v", err)
	}
	sum := sha256.Sum256(data)
	deleted, _ := deletedID.Load().(string)
	if a.ID == deleted || a.Size != int64(len(data)) || a.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("Upload returned %+v, want a new upload (not the deleted %s) of the %d bytes sent", a, deleted, len(data))
	}
	if n := puts.Load(); n != 2 {
		t.Errorf("the file was PUT %d times, want twice: to the deleted upload's URL, its answer lost, and to the new ticket's", n)
	}
	if uploads, _ := uploadsOf(t, srv); uploads != 1 {
		t.Errorf("%d uploads of user 1, want the new one", uploads)
	}
	sendUpload(t, ctx, alice, g.ID, a, "send the new upload")
}

// TestAnObjectStoreUploadDeletedBeforeItsCompletionTakesANewTicketOnce:
// chatd deleted the upload (its upload_ttl past) while its URL was still
// valid, before the PUT: the store takes the bytes and the completion
// answers not_found. Upload takes a new ticket and sends the file there
// once, rather than fail with not_found (its caller's retry uploading
// and charging the file once more). Deleted again, it fails saying what
// happened, not trying for ever.
func TestAnObjectStoreUploadDeletedBeforeItsCompletionTakesANewTicketOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what    string
		deletes int32 // PUTs before which the upload is deleted
	}{{"deleted once", 1}, {"deleted twice", 2}} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			var srv atomic.Pointer[server.Server]
			puts := &atomic.Int32{}
			var mu sync.Mutex
			var deleted []string
			srv.Store(chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, store http.Handler) {
				if r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != "" && puts.Add(1) <= c.deletes {
					id := deleteAsExpired(t, srv.Load())
					mu.Lock()
					deleted = append(deleted, id)
					mu.Unlock()
				}
				store.ServeHTTP(w, r)
			}))
			g := groupOf12(t, srv.Load())
			alice := connect(t, testConfig(t, "mqtt://"+srv.Load().MQTTAddr(), 1))
			ctx := ctxFor(t, 30*time.Second)
			data := []byte("the minutes of the meeting, their upload deleted before the PUT\n")
			a, err := alice.Upload(ctx, g.ID, "minutes.txt", bytes.NewReader(data))
			if c.deletes > 1 {
				if err == nil || !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), "deleted its upload") {
					t.Fatalf("Upload whose upload chatd deleted twice: %+v, %v; want an error matching ErrNotFound saying chatd deleted it", a, err)
				}
				if n := puts.Load(); n != 2 {
					t.Errorf("the file was PUT %d times, want twice (one new ticket)", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Upload whose upload chatd deleted before its completion: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if slices.Contains(deleted, a.ID) || a.Size != int64(len(data)) {
				t.Fatalf("Upload returned %+v, want a new upload (not the deleted %v) of the %d bytes sent", a, deleted, len(data))
			}
			if n := puts.Load(); n != 2 {
				t.Errorf("the file was PUT %d times, want twice: to the deleted upload's URL and to the new ticket's", n)
			}
			if uploads, _ := uploadsOf(t, srv.Load()); uploads != 1 {
				t.Errorf("%d uploads of user 1, want the new one", uploads)
			}
			sendUpload(t, ctx, alice, g.ID, a, "send the new upload")
		})
	}
}

// TestAnObjectStoreUploadDeletedOnItsLastAttemptTakesNoTicketItCannotUse:
// chatd deleted the upload before the PUT of the Upload's last attempt
// (Attempts 1: its only one), so its completion answers not_found. No
// attempt is left to send the file to a new ticket's URL: Upload fails
// saying chatd deleted it, and takes no new ticket, which would be an
// upload charged against the day's bytes that nothing is ever sent to
// (its caller's retry charging the file a third time).
func TestAnObjectStoreUploadDeletedOnItsLastAttemptTakesNoTicketItCannotUse(t *testing.T) {
	t.Parallel()
	var srv atomic.Pointer[server.Server]
	puts := &atomic.Int32{}
	srv.Store(chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, store http.Handler) {
		if r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != "" && puts.Add(1) == 1 {
			deleteAsExpired(t, srv.Load())
		}
		store.ServeHTTP(w, r)
	}))
	g := groupOf12(t, srv.Load())
	alice := connect(t, testConfig(t, "mqtt://"+srv.Load().MQTTAddr(), 1))
	ctx := ctxFor(t, 30*time.Second)
	data := []byte("the minutes of the meeting, deleted on the last attempt\n")
	a, err := alice.UploadWithOptions(ctx, g.ID, "minutes.txt", bytes.NewReader(data), client.UploadOptions{Attempts: 1})
	if err == nil || !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), "deleted its upload") {
		t.Errorf("Upload (1 attempt) whose upload chatd deleted before its completion: %+v, %v; want an error matching ErrNotFound saying chatd deleted it", a, err)
	}
	if n := puts.Load(); n != 1 {
		t.Errorf("the file was PUT %d times, want once (1 attempt)", n)
	}
	if uploads, _ := uploadsOf(t, srv.Load()); uploads != 0 {
		t.Errorf("%d uploads of user 1 after the Upload failed, want none: a ticket was taken that no attempt was left to send the file to", uploads)
	}
}
