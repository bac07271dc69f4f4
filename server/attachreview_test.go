package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestBytesPutAgainToTheUploadURLAfterCompletionAreNeverServed: with an
// object store, the presigned upload URL stays valid until it expires
// (15 minutes) whatever happens meanwhile. Bytes PUT to it again after
// chatd checked and completed the upload (here the photo with its GPS
// position back in) must never reach members: they get the bytes chatd
// checked, stripped and hashed.
func TestBytesPutAgainToTheUploadURLAfterCompletionAreNeverServed(t *testing.T) {
	n := startAttachNode(t, true, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	photo := mediatest.JPEGWithLocation(400, 300, 1)
	tk, r := n.ticket(t, 1, g.ID, "p.jpg", "image/jpeg", len(photo))
	if r.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", r.status, r.body)
	}
	if r = n.put(t, 1, tk, photo); r.status != http.StatusOK {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	up := decode[chat.Upload](t, r)
	if up.State != chat.UploadComplete || up.Attachment == nil {
		t.Fatalf("upload: %+v", up)
	}
	// The same URL again, still valid: the object store takes the bytes.
	if r := n.call(t, 0, tk.Method, tk.URL, photo, tk.Headers); r.status != http.StatusOK {
		t.Fatalf("second PUT to the upload URL: %d %s", r.status, r.body)
	}
	if r := n.call(t, 1, "POST", tk.CompleteURL, nil, nil); r.status != http.StatusOK {
		t.Fatalf("complete again: %d %s", r.status, r.body)
	}
	if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
		map[string]any{"clientMsgId": newID(), "attachments": []chat.AttachmentRef{{UploadID: up.UploadID}}}, nil); r.status != http.StatusCreated {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	got := n.fetch(t, 2, "/v1/attachments/"+up.UploadID, nil)
	if got.status != http.StatusOK {
		t.Fatalf("download: %d %s", got.status, got.body)
	}
	if bytes.Contains(got.body, mediatest.Latitude) {
		t.Error("a member downloaded the photo with its GPS position: bytes PUT after completion were served")
	}
	if hexSHA(got.body) != up.Attachment.SHA256 {
		t.Errorf("downloaded bytes have sha256 %s, the attachment announces %s", hexSHA(got.body), up.Attachment.SHA256)
	}
	// What the second PUT wrote is queued for when the URL expires.
	n.sweepNow(t)
	assertNoOrphans(t, n)
}
