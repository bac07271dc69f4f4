package server_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestARetriedPutOfACompletedUploadAnswersAsTheFirst: a phone whose first
// PUT's answer was lost to the network sends the same bytes again. The
// upload is complete already, and the retry is answered as the first PUT
// was (200, the complete upload), storing nothing new: a 409 would make
// the client believe its file did not go. Other bytes are still 409. With
// an object store the bytes go to the presigned URL and the retried
// completion is answered the same.
func TestARetriedPutOfACompletedUploadAnswersAsTheFirst(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
		// With its GPS position, so what completion hashed (the photo
		// without it) is not the hash of the bytes sent.
		photo := mediatest.JPEGWithLocation(400, 300, 1)
		tk, r := n.ticket(t, 1, g.ID, "p.jpg", "image/jpeg", len(photo))
		if r.status != http.StatusCreated {
			t.Fatalf("ticket: %d %s", r.status, r.body)
		}
		first := n.put(t, 1, tk, photo)
		if first.status != http.StatusOK {
			t.Fatalf("first PUT: %d %s", first.status, first.body)
		}
		up := decode[chat.Upload](t, first)
		if up.State != chat.UploadComplete || up.Attachment == nil {
			t.Fatalf("first PUT: %+v", up)
		}
		keys := blobKeys(t, n)

		again := n.put(t, 1, tk, photo)
		if again.status != http.StatusOK {
			t.Fatalf("the same bytes PUT again: %d %s, want 200 as the first", again.status, again.body)
		}
		if got := decode[chat.Upload](t, again); got.State != chat.UploadComplete || got.Attachment == nil ||
			got.Attachment.SHA256 != up.Attachment.SHA256 || got.Attachment.Size != up.Attachment.Size {
			t.Fatalf("the same bytes PUT again answered %s, the first %s", again.body, first.body)
		}
		if cur := n.call(t, 1, "GET", "/v1/uploads/"+up.UploadID, nil, nil); !bytes.Equal(again.body, cur.body) {
			t.Errorf("the retry answered %s, the upload is %s", again.body, cur.body)
		}
		if n.fake == nil {
			if got := blobKeys(t, n); !slices.Equal(got, keys) {
				t.Errorf("the retry changed the store: %v, was %v", got, keys)
			}
			// Other bytes of the same size: the upload's bytes never change.
			other := bytes.Clone(photo)
			other[len(other)-3] ^= 0xff
			r := n.put(t, 1, tk, other)
			if r.status != http.StatusConflict || errCode(r) != "conflict" || !strings.Contains(string(r.body), "other bytes") {
				t.Errorf("other bytes PUT to a complete upload: %d %s, want 409 conflict", r.status, r.body)
			}
			if r := n.put(t, 1, tk, photo[:len(photo)-1]); r.status != http.StatusConflict {
				t.Errorf("fewer bytes PUT to a complete upload: %d %s, want 409", r.status, r.body)
			}
			if got := blobKeys(t, n); !slices.Equal(got, keys) {
				t.Errorf("the refused PUTs changed the store: %v, was %v", got, keys)
			}
		}
		got := n.fetch(t, 1, "/v1/attachments/"+up.UploadID, nil)
		if got.status != http.StatusOK || hexSHA(got.body) != up.Attachment.SHA256 {
			t.Errorf("download after the retries: %d, sha256 %s, want %s", got.status, hexSHA(got.body), up.Attachment.SHA256)
		}
		// What the object store took again is queued with the URL.
		n.sweepNow(t)
		assertNoOrphans(t, n)
	})
}
