package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestARetriedUploadTicketWithItsKeySendsTheBytesToTheFirstUpload: on
// either store, a ticket asked again with its Idempotency-Key answers 200
// with the first upload's id and expiry; with an object store its URL,
// presigned again, writes the same object, which the completion checks.
func TestARetriedUploadTicketWithItsKeySendsTheBytesToTheFirstUpload(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		_, data, body, key, first := keyedMinutesTicket(t, n)
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

// TestATicketAskedAgainWithItsKeyOnceItsUploadIsCompleteCannotChangeTheBytes:
// a ticket asked again with its Idempotency-Key after its upload was
// completed and sent in a message (a page reloaded before it learnt every
// byte went asks so) answers the same upload, charged nothing, and the
// bytes PUT with it again complete it as before; but other bytes PUT with
// it never reach what members download. With an object store the upload
// is chatd's checked copy by then (type sniffed, location stripped, its
// sha256 announced), which no URL may write.
func TestATicketAskedAgainWithItsKeyOnceItsUploadIsCompleteCannotChangeTheBytes(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		g, data, body, key, first := keyedMinutesTicket(t, n)
		tk := decode[chat.UploadTicket](t, first)
		if r := n.put(t, 1, tk, data); r.status != http.StatusOK {
			t.Fatalf("upload: %d %s", r.status, r.body)
		}
		if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
			map[string]any{"clientMsgId": newID(), "attachments": []chat.AttachmentRef{{UploadID: tk.UploadID}}}, nil); r.status != http.StatusCreated {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		ask := func() chat.UploadTicket {
			t.Helper()
			r := n.call(t, 1, "POST", "/v1/uploads", body, key)
			if r.status != http.StatusOK {
				t.Fatalf("ticket asked again once its upload was sent: %d %s, want 200", r.status, r.body)
			}
			again := decode[chat.UploadTicket](t, r)
			if again.UploadID != tk.UploadID || !again.ExpiresAt.Equal(tk.ExpiresAt) || again.CompleteURL != tk.CompleteURL {
				t.Fatalf("ticket asked again: %+v, want the first's upload %+v", again, tk)
			}
			return again
		}
		// The same bytes again, as a page that did not learn they went.
		if r := n.put(t, 1, ask(), data); r.status != http.StatusOK || decode[chat.Upload](t, r).State != chat.UploadAttached {
			t.Fatalf("the same bytes sent again with the ticket asked again: %d %s, want 200, the upload as it is", r.status, r.body)
		}
		// Other bytes of the same size and type.
		other := []byte("THE MINUTES OF THE MEETING")
		n.put(t, 1, ask(), other)
		got := n.fetch(t, 2, "/v1/attachments/"+tk.UploadID, nil)
		if got.status != http.StatusOK || string(got.body) != string(data) {
			t.Fatalf("a member downloads %d %q, want 200 %q: bytes PUT with a ticket asked again replaced the sent file", got.status, got.body, data)
		}
		if c := pgtest.QueryOne[int64](t, n.Pool, `SELECT count(*) FROM attachment WHERE uploader_id = 1`); c != 1 {
			t.Fatalf("%d uploads, want 1", c)
		}
		// With an object store, the key the bytes went to the second time
		// is one, and its deletion is queued.
		want := int64(0)
		if n.fake != nil {
			want = 1
		}
		if c := pgtest.QueryOne[int64](t, n.Pool, `SELECT count(*) FROM blob_deletion WHERE reason = 'upload URL asked again once complete'`); c != want {
			t.Fatalf("%d deletions queued of keys for bytes PUT with a ticket asked again (asked twice), want %d", c, want)
		}
	})
}

// keyedMinutesTicket: user 1 asks, under a fresh Idempotency-Key, a ticket
// for a minutes file in a new group with user 2; it must be created (201).
// It returns the group, the file's bytes, the ticket's body and key (to ask
// it again) and the first reply.
func keyedMinutesTicket(t *testing.T, n attachNode) (chat.Conversation, []byte, map[string]any, map[string]string, httpReply) {
	t.Helper()
	g := mustGroup(t, context.Background(), n.Server, 1, "files", []int64{2})
	data := []byte("the minutes of the meeting")
	body := map[string]any{"conversationId": g.ID, "name": "minutes.txt", "contentType": "text/plain", "size": len(data)}
	key := map[string]string{"Idempotency-Key": newID()}
	first := n.call(t, 1, "POST", "/v1/uploads", body, key)
	if first.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", first.status, first.body)
	}
	return g, data, body, key, first
}
