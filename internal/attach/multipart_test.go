package attach

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// incompleteUploads lists the bucket's unfinished multipart uploads.
func incompleteUploads(t *testing.T, c *minio.Client, bucket string) []string {
	t.Helper()
	var keys []string
	for u := range c.ListIncompleteUploads(context.Background(), bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("list multipart uploads: %v", u.Err)
		}
		keys = append(keys, u.Key)
	}
	sort.Strings(keys)
	return keys
}

// chatd writes a file over 5 MiB to an object store as a multipart
// upload (the checked copy of a completed upload). One that fails is
// aborted by minio-go, but a crash, or an abort the network lost too,
// leaves its parts in the bucket: billed, named by no object, listed by
// no List, so the deletion queue never meets them. The cleanup round
// aborts them once older than the upload TTL (a write in progress is
// younger), chatd's keys only.
func TestACleanupRoundAbortsTheMultipartUploadsAFailedWriteLeft(t *testing.T) {
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	tr := &s3fake.FailingAborts{}
	blobs, err := blob.NewS3(context.Background(), fake.Config(tr))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := fake.Admin()
	if err != nil {
		t.Fatal(err)
	}
	_, pool := pgtest.NewStore(t, chat.DefaultLimits())
	// Two nodes' services on the same stores: one with the default TTL
	// (24 h), one whose TTL has passed by the time it sweeps.
	service := func(urlExpiry, ttl time.Duration) *Service {
		s, err := New(Config{Store: store.NewAttachments(pool), Blobs: blobs, URLExpiry: urlExpiry, TTL: ttl,
			CleanupInterval: time.Hour, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	young, s := service(0, 0), service(time.Millisecond, 2*time.Millisecond)
	ctx := context.Background()

	// Someone else's unfinished upload in the bucket is not chatd's.
	core := minio.Core{Client: admin}
	if _, err := core.NewMultipartUpload(ctx, fake.Bucket, "backups/db.tar", minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// A 6 MiB copy whose reader fails after the first part, the abort
	// lost with it.
	tr.On.Store(true)
	key := chat.NewBlobKey()
	body := io.MultiReader(bytes.NewReader(make([]byte, 5<<20+1<<10)), iotestErr{})
	if err := blobs.Put(ctx, key, body, 6<<20, "video/mp4"); err == nil {
		t.Fatal("a Put whose reader failed succeeded")
	}
	tr.On.Store(false)
	if got := incompleteUploads(t, admin, fake.Bucket); len(got) != 2 || !slices.Contains(got, key) || !slices.Contains(got, "backups/db.tar") {
		t.Fatalf("unfinished uploads %v, want the failed write's %s and backups/db.tar", got, key)
	}

	// Younger than the TTL: it may be a write in progress.
	young.Sweep()
	if got := incompleteUploads(t, admin, fake.Bucket); len(got) != 2 {
		t.Fatalf("a round aborted a write younger than the TTL: %v left", got)
	}
	testkit.WaitFor(t, 10*time.Second, "the cleanup to abort the failed write's upload", func() bool {
		s.Sweep()
		return len(incompleteUploads(t, admin, fake.Bucket)) == 1
	})
	if n := testutil.ToFloat64(young.metrics.aborted); n != 0 {
		t.Errorf("the round within the TTL counted %v aborted", n)
	}
	if got := incompleteUploads(t, admin, fake.Bucket); len(got) != 1 || got[0] != "backups/db.tar" {
		t.Fatalf("unfinished uploads left %v, want backups/db.tar only", got)
	}
	if n := testutil.ToFloat64(s.metrics.aborted); n != 1 {
		t.Errorf("chat_blob_incomplete_aborted_total is %v, want 1", n)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("the disk failed") }
