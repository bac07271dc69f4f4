package server_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAPhotoWithoutTextIsPushedAsAPhoto: with previews on, a message that
// is a photo alone is not pushed as an empty text: its preview says what
// it is, as the inbox does.
func TestAPhotoWithoutTextIsPushedAsAPhoto(t *testing.T) {
	t.Parallel()
	srv, ep := startPushNode(t, map[string]string{"CHAT_PUSH_PREVIEW": "true"})
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 1, "team", []int64{2})
	subscribeDevice(t, srv, ep, 2, "bob")
	photo := mediatest.JPEG(64, 48)
	var tk chat.UploadTicket
	if st := api(t, srv, 1, "POST", "/v1/uploads", map[string]any{"conversationId": g.ID, "name": "p.jpg",
		"contentType": "image/jpeg", "size": len(photo)}, &tk); st != http.StatusCreated {
		t.Fatalf("upload.create: %d", st)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+srv.HTTPAddr()+tk.URL, bytes.NewReader(photo))
	req.Header.Set("Authorization", "Bearer "+testnode.Token(t, 1))
	for k, v := range tk.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	if _, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: g.ID, SenderID: 1, ClientMsgID: newID(),
		Attachments: []chat.AttachmentRef{{UploadID: tk.UploadID}}}); err != nil {
		t.Fatal(err)
	}
	got := waitAccepted(t, ep, "bob", 1, 10*time.Second)
	if got[0].Type != push.TypeMessage || got[0].Body != "📷 Photo" {
		t.Fatalf("push = %+v, want the body 📷 Photo", got[0])
	}
}
