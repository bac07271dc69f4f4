package attach

import (
	"context"
	"sync"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// statFirst is an object store whose first Stat of a key runs before
// first: another node's work that lands between this node's read of the
// upload and its look at the bytes.
type statFirst struct {
	objectStore
	once  sync.Once
	first func()
}

func (s *statFirst) Stat(ctx context.Context, key string) (chat.BlobInfo, error) {
	s.once.Do(s.first)
	return s.objectStore.Stat(ctx, key)
}

// A completion whose answer was lost is sent again, and may reach
// another node while the first still runs (chatd finishes a request
// whose connection dropped). The node that loses the race read the
// upload pending, then finds no bytes under its URL: the winner copied
// them to a key of its own and deleted the object. It must answer with
// the completed upload, as a completion repeated on one node is answered,
// not 400 "no bytes yet", which made the client take a new ticket and
// store and charge the file twice.
func TestACompletionThatLostTheRaceToAnotherNodesIsAnsweredWithTheCompletedUpload(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	blobs := objectStore{local}
	records := store.NewAttachments(pool)
	winner, err := New(Config{Store: records, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	tk, key := presignedPut(t, winner, records, blobs, g.ID)

	var won chat.Upload
	var wonErr error
	late := &statFirst{objectStore: blobs, first: func() {
		won, wonErr = winner.CompleteUpload(ctx, 1, tk.UploadID)
	}}
	loser, err := New(Config{Store: records, Blobs: late})
	if err != nil {
		t.Fatal(err)
	}
	u, err := loser.CompleteUpload(ctx, 1, tk.UploadID)
	if wonErr != nil || won.State != chat.UploadComplete {
		t.Fatalf("the winning completion: %+v %v", won, wonErr)
	}
	if _, err := blobs.Stat(ctx, key); err == nil {
		t.Fatal("the winner left the uploaded object: the race this test is about did not happen")
	}
	if err != nil {
		t.Fatalf("the completion that lost the race: %v, want the completed upload", err)
	}
	if u.State != chat.UploadComplete || u.UploadID != won.UploadID || u.Attachment == nil || won.Attachment == nil || *u.Attachment != *won.Attachment {
		t.Fatalf("the completion that lost the race: %+v, want %+v", u, won)
	}
}
