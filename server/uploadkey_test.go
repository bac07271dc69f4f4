package server_test

import (
	"context"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestARetriedUploadTicketWithItsKeySendsTheBytesToTheFirstUpload: on
// either store, a ticket asked again with its Idempotency-Key answers 200
// with the first upload's id and expiry; with an object store its URL,
// presigned again, writes the same object, which the completion checks.
func TestARetriedUploadTicketWithItsKeySendsTheBytesToTheFirstUpload(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		g := mustGroup(t, context.Background(), n.Server, 1, "files", []int64{2})
		data := []byte("the minutes of the meeting")
		body := map[string]any{"conversationId": g.ID, "name": "minutes.txt", "contentType": "text/plain", "size": len(data)}
		key := map[string]string{"Idempotency-Key": newID()}
		first := n.call(t, 1, "POST", "/v1/uploads", body, key)
		if first.status != http.StatusCreated {
			t.Fatalf("ticket: %d %s", first.status, first.body)
		}
		again := n.call(t, 1, "POST", "/v1/uploads", body, key)
		if again.status != http.StatusOK {
			t.Fatalf("retried ticket: %d %s", again.status, again.body)
		}
		tk, retried := decode[chat.UploadTicket](t, first), decode[chat.UploadTicket](t, again)
		if retried.UploadID != tk.UploadID || !retried.ExpiresAt.Equal(tk.ExpiresAt) || retried.CompleteURL != tk.CompleteURL {
			t.Fatalf("retried ticket %+v, want the first's upload %+v", retried, tk)
		}
		r := n.put(t, 1, retried, data)
		if r.status != http.StatusOK {
			t.Fatalf("bytes sent with the retried ticket: %d %s", r.status, r.body)
		}
		if u := decode[chat.Upload](t, r); u.UploadID != tk.UploadID || u.State != chat.UploadComplete {
			t.Fatalf("upload: %+v", u)
		}
	})
}
