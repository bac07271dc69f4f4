package server_test

import (
	"context"
	"net/http"
	"testing"
)

// TestABlockedUserCannotUploadIntoTheDirectConversationWithTheBlocker: a
// user blocked by the other member of a direct conversation cannot send
// into it (403 blocked), so an upload for it could never be sent: asking
// for one is refused the same way, before any bytes travel, and charges
// nothing of the day's upload quota. The blocker still uploads.
func TestABlockedUserCannotUploadIntoTheDirectConversationWithTheBlocker(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	d := mustDirect(t, context.Background(), n.Server, 1, 2)
	if r := n.call(t, 2, "PUT", "/v1/me/blocks/1", nil, nil); r.status/100 != 2 {
		t.Fatalf("block: %d %s", r.status, r.body)
	}
	_, r := n.ticket(t, 1, d.ID, "a.pdf", "application/pdf", 20<<20)
	if r.status != http.StatusForbidden || errCode(r) != "blocked" {
		t.Errorf("the blocked user's upload into the direct conversation: %d %s, want 403 blocked", r.status, r.body)
	}
	if c := queryCount(t, n, `SELECT count(*) FROM attachment WHERE uploader_id = 1`); c != 0 {
		t.Errorf("%d uploads recorded", c)
	}
	if c := queryCount(t, n, `SELECT COALESCE(sum(bytes), 0)::int FROM upload_quota WHERE user_id = 1`); c != 0 {
		t.Errorf("%d bytes of the blocked user's quota spent", c)
	}
	if _, r := n.ticket(t, 2, d.ID, "a.pdf", "application/pdf", 100); r.status != http.StatusCreated {
		t.Errorf("the blocker's upload: %d %s", r.status, r.body)
	}
}
