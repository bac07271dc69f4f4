package attach

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// errStoreRead is an object store's GET failing half-way (a connection
// reset, a 503 of the store).
var errStoreRead = errors.New("read tcp: connection reset by peer")

// failingReads wraps a blob store: the blobs opened for which fail(key,
// n) says so (n: how many times key was opened, from 1) fail every read.
type failingReads struct {
	chat.BlobStore
	fail func(key string, n int) bool

	mu    sync.Mutex
	opens map[string]int
}

func (f *failingReads) Open(ctx context.Context, key string) (chat.BlobReader, error) {
	r, err := f.BlobStore.Open(ctx, key)
	if err != nil {
		return r, err
	}
	f.mu.Lock()
	if f.opens == nil {
		f.opens = map[string]int{}
	}
	f.opens[key]++
	broken := f.fail(key, f.opens[key])
	f.mu.Unlock()
	if broken {
		return brokenReader{r}, nil
	}
	return r, nil
}

type brokenReader struct{ chat.BlobReader }

func (brokenReader) Read([]byte) (int, error)          { return 0, errStoreRead }
func (brokenReader) ReadAt([]byte, int64) (int, error) { return 0, errStoreRead }

// An object store whose GET fails while chatd measures the checked copy
// of an upload is the store failing, not the file: the completion answers
// unavailable and the upload stays pending, so the client's retry
// completes it (it was deleted, and the retry answered not_found).
func TestACompletionWhoseStoreReadFailsStaysPendingAndCompletesOnRetry(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	records := store.NewAttachments(pool)
	var uploaded string // the key the client PUT to
	var failedOnce bool
	blobs := &failingReads{BlobStore: objectStore{local}, fail: func(key string, n int) bool {
		if key == uploaded || failedOnce {
			return false
		}
		failedOnce = true // the first completion's copy, read to measure it
		return true
	}}
	s, err := New(Config{Store: records, Blobs: blobs, ThumbnailWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	png := mediatest.PNG(40, 30)
	tk, err := s.CreateUpload(ctx, chat.UploadRequest{ConversationID: g.ID, UserID: 1, Name: "p.png", ContentType: "image/png", Size: int64(len(png))})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.GetUpload(ctx, tk.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	uploaded = rec.BlobKey
	if err := local.Put(ctx, rec.BlobKey, bytes.NewReader(png), int64(len(png)), "image/png"); err != nil {
		t.Fatal(err)
	}

	_, err = s.CompleteUpload(ctx, 1, tk.UploadID)
	if chat.ErrorCode(err) != chat.CodeUnavailable {
		t.Fatalf("completion whose store read failed: %v, want unavailable", err)
	}
	if u, err := s.GetUpload(ctx, 1, tk.UploadID); err != nil || u.State != chat.UploadPending {
		t.Fatalf("after the store failed: %+v %v, want the upload pending still", u, err)
	}
	u, err := s.CompleteUpload(ctx, 1, tk.UploadID)
	if err != nil || u.State != chat.UploadComplete || u.Attachment == nil || u.Attachment.Width != 40 {
		t.Fatalf("completion retried: %+v %v, want complete, 40 px wide", u, err)
	}
}

// A thumbnail whose read of the original the store cut short is made on
// a later round: it was recorded failed, and the image went without a
// thumbnail for good.
func TestAThumbnailWhoseStoreReadFailedIsMadeOnALaterRound(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	// Opened once to measure it, then by the thumbnailer.
	blobs := &failingReads{BlobStore: local, fail: func(_ string, n int) bool { return n == 2 }}
	s, err := New(Config{Store: store.NewAttachments(pool), Blobs: blobs, ThumbnailWorkers: 1,
		ThumbnailWait: 10 * time.Second, CleanupInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	tk := putPNG(t, s, g.ID) // returns once the first attempt is over
	var state string
	if err := pool.QueryRow(ctx, `SELECT thumb_state FROM attachment WHERE id = $1`, tk.UploadID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "pending" {
		t.Fatalf("thumbnail whose read failed: %s, want pending (to be made again)", state)
	}
	s.Sweep()
	testkit.WaitFor(t, 10*time.Second, "the thumbnail", func() bool {
		u, err := s.GetUpload(ctx, 1, tk.UploadID)
		return err == nil && u.Attachment != nil && u.Attachment.Thumbnail != nil
	})
}

// stalledDeletes is a blob store whose deletions never answer (a
// black-holed object store): each waits for its context, counted.
type stalledDeletes struct {
	chat.BlobStore
	mu    sync.Mutex
	calls int
}

func (s *stalledDeletes) Delete(ctx context.Context, _ string) error {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (s *stalledDeletes) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// A deletion round holds its queue rows in an open transaction while it
// calls the blob store: a store that does not answer must cost the round
// one DeleteTimeout, then the round gives up on the store (the rest
// backs off as failed) and commits. It waited for ever, the transaction
// open and the cleanup loop (upload expiry, thumbnails) stopped.
func TestADeletionRoundGivesUpOnABlobStoreThatDoesNotAnswer(t *testing.T) {
	_, pool, _, local := groupAndDisk(t)
	ctx := context.Background()
	records := store.NewAttachments(pool)
	blobs := &stalledDeletes{BlobStore: local}
	s, err := New(Config{Store: records, Blobs: blobs, DeleteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) }) // ends a round still waiting
	for range 3 {
		if err := records.QueueBlobDeletion(ctx, chat.NewBlobKey(), "test", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { s.Sweep(); close(done) }()
	testkit.Receive(t, done, 10*time.Second, "the deletion round still waits for a blob store that does not answer")
	if n := blobs.count(); n != 1 {
		t.Fatalf("the round called the stalled store %d times, want 1 (then it gives up on it)", n)
	}
	var backedOff int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM blob_deletion WHERE attempts = 1 AND not_before > now() AND last_error <> ''`).Scan(&backedOff); err != nil {
		t.Fatal(err)
	}
	if backedOff != 3 {
		t.Fatalf("%d of 3 queued deletions back off with their error, want all", backedOff)
	}
}

// The deletion of an uploaded object a completion makes at once (it is
// queued besides) is bounded too: a store that does not answer it does
// not hold the client's completion.
func TestACompletionDoesNotWaitForABlobStoreThatDoesNotDelete(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	records := store.NewAttachments(pool)
	s, err := New(Config{Store: records, Blobs: &stalledDeletes{BlobStore: objectStore{local}}, DeleteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := presignedPut(t, s, records, local, g.ID)
	type result struct {
		u   chat.Upload
		err error
	}
	got := make(chan result, 1)
	go func() { u, err := s.CompleteUpload(ctx, 1, tk.UploadID); got <- result{u, err} }()
	select {
	case r := <-got:
		if r.err != nil || r.u.State != chat.UploadComplete {
			t.Fatalf("completion: %+v %v", r.u, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the completion still waits for the blob store to delete the uploaded object")
	}
}

// presignedPut asks s for the upload of a small text file, user 1's into
// conv, and writes its bytes straight into blobs, as a client's PUT to a
// presigned URL does; the upload is not completed. It returns the ticket
// and the key the bytes are under.
func presignedPut(t *testing.T, s *Service, records *store.Attachments, blobs interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
}, conv int64) (chat.UploadTicket, string) {
	t.Helper()
	ctx := context.Background()
	body := []byte("hello, world\n")
	tk, err := s.CreateUpload(ctx, chat.UploadRequest{ConversationID: conv, UserID: 1, Name: "a.txt", ContentType: "text/plain", Size: int64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.GetUpload(ctx, tk.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	if err := blobs.Put(ctx, rec.BlobKey, bytes.NewReader(body), int64(len(body)), "text/plain"); err != nil {
		t.Fatal(err)
	}
	return tk, rec.BlobKey
}
