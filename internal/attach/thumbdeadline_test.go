package attach

import (
	"context"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// slowPictures is a local blob store whose originals are slow to read
// through (Read: decoding; not ReadAt: the header checks), once per
// opening: a picture that takes a thumbnail job longer to read and
// decode than its deadline.
type slowPictures struct {
	*blob.Local
	delay time.Duration
}

func (s slowPictures) Open(ctx context.Context, key string) (chat.BlobReader, error) {
	r, err := s.Local.Open(ctx, key)
	if err != nil || strings.HasSuffix(key, ".thumb") {
		return r, err
	}
	return &slowRead{BlobReader: r, delay: s.delay}, nil
}

type slowRead struct {
	chat.BlobReader
	delay time.Duration
}

func (r *slowRead) Read(p []byte) (int, error) {
	if r.delay > 0 {
		time.Sleep(r.delay) // the decoder's work, as long
		r.delay = 0
	}
	return r.BlobReader.Read(p)
}

// A thumbnail made after its job's deadline (a picture slow to decode)
// was not stored: holding its blob's deletion failed on the expired
// deadline, the image stayed pending, and every cleanup round decoded it
// again, for ever. Once made, it is stored and recorded.
func TestAThumbnailMadeAfterItsJobsDeadlineIsStoredNotMadeAgainEveryRound(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	s, err := New(Config{Store: store.NewAttachments(pool), Blobs: slowPictures{Local: local, delay: 300 * time.Millisecond},
		ThumbnailWorkers: 1, ThumbnailWait: time.Millisecond, CleanupInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.thumbTimeout = 100 * time.Millisecond
	s.Start()
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	tk := putPNG(t, s, g.ID)
	testkit.WaitFor(t, 10*time.Second, "the thumbnail of a picture slower to decode than the job's deadline", func() bool {
		u, err := s.GetUpload(context.Background(), 1, tk.UploadID)
		return err == nil && u.Attachment != nil && u.Attachment.Thumbnail != nil
	})
}
