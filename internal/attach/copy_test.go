package attach

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/store"
)

// objectStore is a local store that says it is an object store: clients
// PUT to a presigned URL (the test writes the upload's key itself) and
// chatd copies what it checked to a key of its own.
type objectStore struct{ *blob.Local }

func (objectStore) Direct() bool { return true }

func (objectStore) PresignPut(context.Context, string, string, int64, time.Duration) (string, map[string]string, error) {
	return "https://bucket.example/put", map[string]string{}, nil
}

// dyingStore is the store of record of a process that dies the moment it
// records an upload complete: that call and every later one never reach
// PostgreSQL.
type dyingStore struct {
	chat.AttachmentStore
	dead atomic.Bool
}

var errDead = errors.New("the process died")

func (d *dyingStore) CompleteUpload(context.Context, string, chat.UploadMeta) (bool, error) {
	d.dead.Store(true)
	return false, errDead
}

func (d *dyingStore) QueueBlobDeletion(ctx context.Context, key, reason string, notBefore time.Time) error {
	if d.dead.Load() {
		return errDead
	}
	return d.AttachmentStore.QueueBlobDeletion(ctx, key, reason, notBefore)
}

func (d *dyingStore) DropUpload(ctx context.Context, id string, notBefore time.Time) error {
	if d.dead.Load() {
		return errDead
	}
	return d.AttachmentStore.DropUpload(ctx, id, notBefore)
}

// With an object store, chatd copies a completed upload's checked bytes to
// a key of its own before it records the upload complete. A crash in
// between (or the database lost then) must leave that copy queued for
// deletion, not an object nothing names, forever in the bucket.
func TestACopyWrittenByACompletionThatNeverCommittedIsDeleted(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	blobs := objectStore{local}
	records := store.NewAttachments(pool)
	dying := &dyingStore{AttachmentStore: records}
	s, err := New(Config{Store: dying, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	tk, key := presignedPut(t, s, records, blobs, g.ID)
	if _, err := s.CompleteUpload(ctx, 1, tk.UploadID); err == nil {
		t.Fatal("a completion that never committed succeeded")
	}

	// After the restart, once every queued deletion is due, a cleanup
	// round leaves only what a row names: the upload's own bytes (it is
	// pending still, and can be completed again).
	after, err := New(Config{Store: records, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE blob_deletion SET not_before = now()`); err != nil {
		t.Fatal(err)
	}
	after.Sweep()
	var keys []string
	if err := blobs.List(ctx, func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != key {
		t.Fatalf("blobs after the restart: %v, want only the upload's own %s (the copy is orphaned)", keys, key)
	}
	// And completed again, the upload is complete, its copy kept and no
	// longer queued.
	u, err := after.CompleteUpload(ctx, 1, tk.UploadID)
	if err != nil || u.State != chat.UploadComplete {
		t.Fatalf("complete again: %+v %v", u, err)
	}
	cur, err := records.GetUpload(ctx, tk.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM blob_deletion WHERE blob_key = $1`, cur.BlobKey).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != 0 {
		t.Fatal("the copy recorded complete is still queued for deletion")
	}
}
