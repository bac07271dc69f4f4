package httpapi_test

import (
	"strings"
	"testing"
)

// TestAnIdempotencyKeyThatIsNoUUIDIsRefusedByItsHeaderName: over HTTP the
// key travels in the Idempotency-Key header, so a malformed one is 400
// invalid naming that header, not the RPC payload's clientMsgId, which
// the caller never sent. Nothing is created.
func TestAnIdempotencyKeyThatIsNoUUIDIsRefusedByItsHeaderName(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(1, 2)
	m := e.sendMsg(1, g, newID(), "target")
	bad := withHeader("Idempotency-Key", "not-a-uuid")
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"group create", "POST", "/v1/conversations", `{"type":"group","title":"team","members":[2]}`},
		{"upload ticket", "POST", "/v1/uploads", pathf(`{"conversationId":%d,"name":"a.txt","contentType":"text/plain","size":5}`, g)},
		{"recall", "DELETE", pathf("/v1/conversations/%d/messages/%d", g, m.Seq), nil},
		{"reaction", "PUT", pathf("/v1/conversations/%d/messages/%d/reactions/ok", g, m.Seq), nil},
	} {
		r := e.do(1, c.method, c.path, c.body, bad)
		if r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("%s: %d %s, want 400 invalid", c.name, r.status, r.body)
			continue
		}
		if msg := string(r.body); !strings.Contains(msg, "Idempotency-Key must be a UUID") || strings.Contains(msg, "clientMsgId") {
			t.Errorf("%s: %s, want the refusal to name the Idempotency-Key header", c.name, msg)
		}
	}
	var groups int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM conversation WHERE type = 'GROUP'`).Scan(&groups); err != nil {
		t.Fatal(err)
	}
	if groups != 1 {
		t.Errorf("%d groups, want 1: the refused create made one", groups)
	}
}
