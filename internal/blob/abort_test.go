package blob_test

import (
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/testkit"
)

// listingGoroutines counts minio-go's goroutines listing multipart
// uploads.
func listingGoroutines() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "minio-go/v7.(*Client).listIncompleteUploads")
}

// A cleanup round that stops listing early, at its limit or on an abort
// the store refuses, leaves no goroutine of the listing behind: it runs
// every round, and a key that may list but not abort refuses every one.
func TestAbortIncompleteStoppedEarlyLeavesNoListingBehind(t *testing.T) {
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	tr := &s3fake.FailingAborts{}
	s, err := blob.NewS3(context.Background(), fake.Config(tr))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := fake.Admin()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	core := minio.Core{Client: admin}
	for range 8 {
		if _, err := core.NewMultipartUpload(ctx, fake.Bucket, chat.NewBlobKey(), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Hour)

	if n, err := s.AbortIncomplete(ctx, later, 2); err != nil || n != 2 {
		t.Fatalf("abort at most 2: %d, %v", n, err)
	}
	testkit.WaitFor(t, 5*time.Second, "the listing stopped at the limit to end", func() bool { return listingGoroutines() == 0 })

	tr.On.Store(true)
	if _, err := s.AbortIncomplete(ctx, later, 100); err == nil {
		t.Fatal("an abort refused by the store succeeded")
	}
	testkit.WaitFor(t, 5*time.Second, "the listing stopped by a refused abort to end", func() bool { return listingGoroutines() == 0 })
}

// A List whose callback fails stops the listing and leaves no goroutine
// of it behind (operators' checks list whole buckets, and stop at the
// first key they cannot handle).
func TestAListStoppedByItsCallbackLeavesNoListingBehind(t *testing.T) {
	s := newS3(t)
	ctx := context.Background()
	for range 8 {
		if err := s.Put(ctx, chat.NewBlobKey(), strings.NewReader("x"), 1, "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	if err := s.List(ctx, func(string) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("List: %v, want the callback's error", err)
	}
	testkit.WaitFor(t, 5*time.Second, "the listing stopped by its callback to end", func() bool {
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		return !strings.Contains(b.String(), "minio-go/v7.(*Client).ListObjects")
	})
}
