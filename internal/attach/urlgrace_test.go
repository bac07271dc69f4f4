package attach

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/store"
)

// TestAnObjectPutAfterItsURLExpiredByTheDatabasesClockIsStillDeleted: an
// object store checks a presigned URL's expiry by its own clock, and
// takes an object whose PUT began before it (its last byte comes later).
// The deletion of the key the URL names was due at the URL's expiry by
// the database's clock: a store whose clock lags took a PUT after the
// key's deletion ran, and that object stayed, named by nothing. Whether
// the upload was completed, refused for its bytes or expired unused, the
// key's deletion waits for the URL's lifetime and a clock skew more.
func TestAnObjectPutAfterItsURLExpiredByTheDatabasesClockIsStillDeleted(t *testing.T) {
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	blobs, err := blob.NewS3(context.Background(), fake.Config(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, pool, g, _ := groupAndDisk(t)
	records := store.NewAttachments(pool)
	s, err := New(Config{Store: records, Blobs: blobs, CleanupInterval: time.Hour, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := []byte("hello, world\n")
	put := func(tk chat.UploadTicket) int {
		t.Helper()
		req, err := http.NewRequest(tk.Method, tk.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tk.Headers {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	// expired: by the database's clock the URL expired a second ago; the
	// object store's, a second behind or more, still takes it.
	expired := func(id, more string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE attachment SET url_expires_at = now() - interval '1 second'`+more+` WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what, declared string
		end            func(id string)
	}{
		{"completed", "text/plain", func(id string) {
			expired(id, "")
			if u, err := s.CompleteUpload(ctx, 1, id); err != nil || u.State != chat.UploadComplete {
				t.Fatalf("complete: %+v %v", u, err)
			}
		}},
		{"refused for its bytes", "image/png", func(id string) {
			expired(id, "")
			if _, err := s.CompleteUpload(ctx, 1, id); chat.ErrorCode(err) != chat.CodeUnsupported {
				t.Fatalf("complete text declared as a PNG: %v, want unsupported", err)
			}
		}},
		{"expired unused", "text/plain", func(id string) { expired(id, ", created_at = now() - interval '2 days'") }},
	} {
		tk, err := s.CreateUpload(ctx, chat.UploadRequest{ConversationID: g.ID, UserID: 1, Name: "a.txt", ContentType: c.declared, Size: int64(len(body))})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := records.GetUpload(ctx, tk.UploadID)
		if err != nil {
			t.Fatal(err)
		}
		if st := put(tk); st != http.StatusOK {
			t.Fatalf("%s: PUT to the upload URL: %d", c.what, st)
		}
		c.end(tk.UploadID)
		s.Sweep()
		// The client's PUT that began before the expiry, by the object
		// store's clock, ends now.
		if st := put(tk); st != http.StatusOK {
			t.Fatalf("%s: PUT to the upload URL its store still takes: %d", c.what, st)
		}
		s.Sweep()
		if keys, err := fake.Keys(); err != nil || !slices.Contains(keys, rec.BlobKey) {
			t.Fatalf("%s: the late PUT's object is not in the bucket (%v)", c.what, err)
		}
		var queued bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM blob_deletion WHERE blob_key = $1)`, rec.BlobKey).Scan(&queued); err != nil {
			t.Fatal(err)
		}
		if !queued {
			t.Errorf("%s: the object PUT to its URL once it expired by the database's clock is in the bucket, its deletion done already", c.what)
			continue
		}
		// Once the margin passed, it is deleted.
		if _, err := pool.Exec(ctx, `UPDATE blob_deletion SET not_before = now() WHERE blob_key = $1`, rec.BlobKey); err != nil {
			t.Fatal(err)
		}
		s.Sweep()
		if keys, err := fake.Keys(); err != nil || slices.Contains(keys, rec.BlobKey) {
			t.Errorf("%s: the object of the upload URL is still in the bucket once its deletion was due (%v)", c.what, err)
		}
	}
}
