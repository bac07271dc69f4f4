package attach

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// heldThumbnails is a local blob store whose thumbnail writes wait until
// release is closed, counting them.
type heldThumbnails struct {
	*blob.Local
	release chan struct{}
	puts    chan string
}

func (h heldThumbnails) Put(ctx context.Context, key string, r io.Reader, size int64, ctype string) error {
	if strings.HasSuffix(key, ".thumb") {
		h.puts <- key
		<-h.release
	}
	return h.Local.Put(ctx, key, r, size, ctype)
}

// A thumbnail still being made when the cleanup's round runs is pending in
// PostgreSQL: the round must not queue it again, or every image waiting
// in a backlog is decoded and stored once per round it outlasts.
func TestACleanupRoundDoesNotQueueAThumbnailBeingMadeAgain(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	blobs := heldThumbnails{Local: local, release: make(chan struct{}), puts: make(chan string, 4)}
	s, err := New(Config{Store: store.NewAttachments(pool), Blobs: blobs, ThumbnailWorkers: 1,
		ThumbnailWait: time.Millisecond, CleanupInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		select {
		case <-blobs.release:
		default:
			close(blobs.release)
		}
		_ = s.Close(context.Background())
	})
	tk := putPNG(t, s, g.ID)
	<-blobs.puts // the only worker is storing the thumbnail
	s.Sweep()
	if n := len(s.jobs); n != 0 {
		t.Fatalf("the cleanup round queued %d more thumbnails of an image whose thumbnail is being made", n)
	}
	close(blobs.release)
	testkit.WaitFor(t, 10*time.Second, "the thumbnail", func() bool {
		u, err := s.GetUpload(ctx, 1, tk.UploadID)
		return err == nil && u.Attachment != nil && u.Attachment.Thumbnail != nil
	})
	// Made, the next round has nothing to queue.
	s.Sweep()
	if n := len(s.jobs); n != 0 {
		t.Fatalf("%d thumbnails queued after it was made", n)
	}
}

// lostThumbnails is the store of record of a process that dies as it
// records a thumbnail.
type lostThumbnails struct{ chat.AttachmentStore }

func (lostThumbnails) SetThumbnail(context.Context, string, string, *chat.Thumbnail) (bool, error) {
	return false, errDead
}

// An image is recalled while its thumbnail is being made, and the
// recall's deletion falls due (a minute later) before the thumbnail is
// written; the process dies before it records it. The thumbnail written
// after the deletion must still go, not stay named by nothing.
func TestAThumbnailWrittenForARecalledImageJustBeforeACrashIsDeletedToo(t *testing.T) {
	st, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	blobs := heldThumbnails{Local: local, release: make(chan struct{}), puts: make(chan string, 4)}
	records := store.NewAttachments(pool)
	s, err := New(Config{Store: lostThumbnails{records}, Blobs: blobs, ThumbnailWorkers: 1,
		ThumbnailWait: time.Millisecond, CleanupInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	released := false
	t.Cleanup(func() {
		if !released {
			close(blobs.release)
		}
		_ = s.Close(context.Background())
	})
	tk := putPNG(t, s, g.ID)
	<-blobs.puts // the thumbnail is about to be written
	sent, err := st.Send(ctx, chat.SendRequest{ConversationID: g.ID, SenderID: 1, ClientMsgID: uuid.NewString(),
		Attachments: []chat.AttachmentRef{{UploadID: tk.UploadID}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Change(ctx, chat.Change{Kind: chat.KindRecall, ConversationID: g.ID, UserID: 1, ClientMsgID: uuid.NewString(),
		TargetSeq: sent.Message.Seq}); err != nil {
		t.Fatal(err)
	}
	// A minute later, another node's cleanup round.
	other, err := New(Config{Store: records, Blobs: local})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE blob_deletion SET not_before = not_before - interval '61 seconds'`); err != nil {
		t.Fatal(err)
	}
	other.Sweep()
	// The thumbnail is written; the process dies recording it.
	close(blobs.release)
	released = true
	testkit.WaitFor(t, 10*time.Second, "the thumbnail job to end", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.thumbs) == 0
	})
	// Later, every queued deletion is due.
	if _, err := pool.Exec(ctx, `UPDATE blob_deletion SET not_before = now()`); err != nil {
		t.Fatal(err)
	}
	other.Sweep()
	var keys []string
	if err := local.List(ctx, func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("blobs left of a recalled image: %v", keys)
	}
}

// groupAndDisk is a store with a group of users 1 and 2, and a blob store
// on local disk.
func groupAndDisk(t *testing.T) (*store.Store, *pgxpool.Pool, chat.Conversation, *blob.Local) {
	t.Helper()
	st, pool := pgtest.NewStore(t, chat.DefaultLimits())
	g, _, err := st.CreateGroup(context.Background(), chat.GroupRequest{CreatorID: 1, Title: "g", Members: []int64{2}})
	if err != nil {
		t.Fatal(err)
	}
	local, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st, pool, g, local
}

// putPNG uploads a 400×300 PNG as user 1's into conv, not sent yet.
func putPNG(t *testing.T, s *Service, conv int64) chat.UploadTicket {
	t.Helper()
	ctx := context.Background()
	png := mediatest.PNG(400, 300)
	tk, err := s.CreateUpload(ctx, chat.UploadRequest{ConversationID: conv, UserID: 1, Name: "p.png", ContentType: "image/png", Size: int64(len(png))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutUpload(ctx, 1, tk.UploadID, bytes.NewReader(png), int64(len(png))); err != nil {
		t.Fatal(err)
	}
	return tk
}
