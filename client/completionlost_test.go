package client_test

import (
	"bytes"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestAnObjectStoreUploadsCompletionWhoseReplyWasLostIsAskedAgain: with
// an object store, the bytes go to the store and chatd learns of them
// from upload.complete, which it answers the same when sent again (to any
// node, even while the first runs: docs/http.md). A completion whose
// reply was lost with its connection is sent again on the next connection
// as a read is, within the same attempt at the bytes: Upload, allowed one
// PUT, returns the upload after one PUT. Before, the completion was sent
// as a change that must not be repeated: it failed with the connection,
// and with one attempt allowed the Upload failed though the store held
// the file and chatd would have completed it.
func TestAnObjectStoreUploadsCompletionWhoseReplyWasLostIsAskedAgain(t *testing.T) {
	t.Parallel()
	var puts atomic.Int32
	g, alice := storeBehind(t, func(http.ResponseWriter, *http.Request) bool {
		puts.Add(1)
		return false // to the store
	})
	connects := alice.Stats().Connects
	var lost atomic.Bool
	loseNextReplyWhere(alice, func(payload []byte) bool {
		if bytes.Contains(payload, []byte(`"state":"complete"`)) && !lost.Load() {
			lost.Store(true)
			return true
		}
		return false
	})
	ctx := ctxFor(t, 30*time.Second)
	data := []byte("completed once, its answer lost\n")
	a, err := alice.UploadWithOptions(ctx, g.ID, "lost.txt", bytes.NewReader(data), client.UploadOptions{Attempts: 1})
	if !lost.Load() {
		t.Fatalf("no completion's reply was lost (Upload: %+v, %v)", a, err)
	}
	if err != nil {
		t.Fatalf("Upload allowed one PUT, the completion's reply lost: %v, want the upload completed by the completion sent again", err)
	}
	if a.Size != int64(len(data)) {
		t.Errorf("Upload returned %+v, want the %d bytes sent", a, len(data))
	}
	if n := puts.Load(); n != 1 {
		t.Errorf("the file was PUT %d times, want once", n)
	}
	if n := alice.Stats().Connects; n <= connects {
		t.Errorf("connects %d, was %d: the reply was lost without its connection", n, connects)
	}
	sendUpload(t, ctx, alice, g.ID, a, "send the upload")
}
