package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestAForwardedCopyIsTheForwardersUploadNotTheOriginalUploaders: a
// forward's files are attachments of the new message, put into its
// conversation by the forwarder. GET /v1/uploads/{id} answers "the
// caller's upload" with its conversation, seq, name and caption: for a
// copy in a conversation the original uploader is not in, they must get
// 404 as for anyone else's upload, not what became of the forward there;
// the forwarder sees the copy as theirs, attached at the forward's seq.
func TestAForwardedCopyIsTheForwardersUploadNotTheOriginalUploaders(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	src := mustGroup(t, ctx, n.Server, 1, "source", []int64{2})
	dst := mustGroup(t, ctx, n.Server, 2, "target", []int64{3}) // user 1 is not in it
	up := n.upload(t, 1, src.ID, "view.png", "image/png", mediatest.PNG(40, 30))
	sent := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", src.ID), map[string]any{"clientMsgId": newID(),
		"attachments": []chat.AttachmentRef{{UploadID: up.UploadID, Caption: "the view"}}}, nil)
	if sent.status != http.StatusCreated {
		t.Fatalf("send: %d %s", sent.status, sent.body)
	}
	r := n.call(t, 2, "POST", fmt.Sprintf("/v1/conversations/%d/messages", dst.ID),
		map[string]any{"clientMsgId": newID(), "forward": map[string]any{"conversationId": src.ID, "seq": decode[struct{ Seq int64 }](t, sent).Seq}}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("forward: %d %s", r.status, r.body)
	}
	fw := decode[struct {
		Seq         int64
		Attachments []chat.Attachment
	}](t, r)
	copyID := fw.Attachments[0].ID
	if r := n.call(t, 1, "GET", "/v1/uploads/"+copyID, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("the original uploader, not in the forward's conversation, GET /v1/uploads/{copy}: %d %s", r.status, r.body)
	}
	r = n.call(t, 2, "GET", "/v1/uploads/"+copyID, nil, nil)
	if u := decode[chat.Upload](t, r); r.status != http.StatusOK || u.State != chat.UploadAttached || u.ConversationID != dst.ID || u.Seq != fw.Seq {
		t.Errorf("the forwarder's GET /v1/uploads/{copy}: %d %s", r.status, r.body)
	}
	if r := n.call(t, 1, "GET", "/v1/uploads/"+up.UploadID, nil, nil); r.status != http.StatusOK {
		t.Errorf("the original uploader's own upload: %d %s", r.status, r.body)
	}
}
