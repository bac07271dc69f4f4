package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// TestAnUploadsBytesAfterLosingTheConversationAreRefusedAsANewTicket: the
// bytes of an upload are written under its ticket, leave to write into
// its conversation, which a user who left it, was removed from it or was
// blocked in a direct one no longer has: their PUT, or their completion
// (HTTP or RPC), is refused as a new ticket would be (403 not_member, 403
// blocked), of a pending upload (nothing is stored: it stays pending and
// expires) as of a complete one, whose bytes could never be sent there.
// The uploader still sees where it stands, and both are dropped with
// their bytes at the expiry of uploads never sent, as any other.
func TestAnUploadsBytesAfterLosingTheConversationAreRefusedAsANewTicket(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	const text = "0123456789"
	ticket := func(conv int64) string {
		var tk chat.UploadTicket
		e.must(http.StatusCreated, member, "POST", "/v1/uploads",
			map[string]any{"conversationId": conv, "name": "notes.txt", "contentType": "text/plain", "size": len(text)}, &tk)
		return "/v1/uploads/" + tk.UploadID
	}
	put := func(up string) resp { return e.do(member, "PUT", up, text, withHeader("Content-Type", "text/plain")) }
	for _, c := range e.conversationLosses() {
		pending, complete := ticket(c.conv), ticket(c.conv)
		if r := put(complete); r.status != http.StatusOK {
			t.Fatalf("%s: PUT while a member: %d %s", c.what, r.status, r.body)
		}
		c.lose(c.conv)
		refused := func(what string, status int, code string, body []byte) {
			t.Helper()
			if status != http.StatusForbidden || code != c.code {
				t.Errorf("%s: %s: %d %s, want 403 %s", c.what, what, status, body, c.code)
			}
		}
		for _, up := range []string{pending, complete} {
			r := put(up)
			refused("PUT "+up, r.status, r.errorCode(), r.body)
			r = e.do(member, "POST", up+"/complete", nil)
			refused("POST "+up+"/complete", r.status, r.errorCode(), r.body)
			rr := e.rpc(member, "upload.complete", pathf(`{"uploadId":%q}`, up[len("/v1/uploads/"):]))
			refused("RPC upload.complete of "+up, rr.status, rr.code, rr.raw)
		}
		var u chat.Upload
		if e.must(http.StatusOK, member, "GET", pending, nil, &u); u.State != chat.UploadPending {
			t.Errorf("%s: the refused upload is %s, want pending (to expire)", c.what, u.State)
		}
	}
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE attachment SET created_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if n, err := store.NewAttachments(e.pool).ExpireUploads(ctx, time.Now().Add(-24*time.Hour), 0, 100); err != nil || n != 6 {
		t.Fatalf("expire uploads: %d, %v; want the 6 refused ones", n, err)
	}
	if n := queryInt(t, e.pool, `SELECT count(*) FROM blob_deletion WHERE reason = 'expired'`); n != 6 {
		t.Errorf("%d blobs of the 6 expired uploads queued for deletion", n)
	}
}
