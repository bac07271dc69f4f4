package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
)

// TestAnObjectStoreUploadCompletedAfterLeavingItsGroupIsRefused: with an
// object store the bytes reach the bucket by a presigned URL chatd cannot
// revoke, and the completion is what reads them in: a member who left the
// group since the ticket is refused it as a new ticket would be (403
// not_member), and the upload stays pending, to expire with its object.
func TestAnObjectStoreUploadCompletedAfterLeavingItsGroupIsRefused(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, true, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	data := []byte("0123456789")
	tk, r := n.ticket(t, 2, g.ID, "notes.txt", "text/plain", len(data))
	if r.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", r.status, r.body)
	}
	if r := n.call(t, 0, tk.Method, tk.URL, data, tk.Headers); r.status != http.StatusOK {
		t.Fatalf("PUT to the bucket: %d %s", r.status, r.body)
	}
	if r := n.call(t, 2, "DELETE", fmt.Sprintf("/v1/conversations/%d/members/2", g.ID), nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("leave: %d %s", r.status, r.body)
	}
	if r := n.call(t, 2, "POST", tk.CompleteURL, nil, nil); r.status != http.StatusForbidden || errCode(r) != "not_member" {
		t.Errorf("completed after leaving: %d %s, want 403 not_member", r.status, r.body)
	}
	if c := queryCount(t, n, `SELECT count(*) FROM attachment WHERE id = $1 AND state = 'pending'`, tk.UploadID); c != 1 {
		t.Errorf("the refused upload is not pending (%d rows)", c)
	}
}
