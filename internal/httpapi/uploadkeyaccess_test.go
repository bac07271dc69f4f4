package httpapi_test

import (
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/attach"
)

// conversationLoss is one way member loses the right to write into a
// conversation: lose(conv) makes member leave it, be removed from it or
// be blocked in it, after which writing there is refused with code.
type conversationLoss struct {
	what string
	conv int64
	lose func(conv int64)
	code string
}

// conversationLosses are member's three ways of losing a conversation of
// theirs with owner (a group left, a group removed from, a direct one
// blocked in), each on a conversation of its own.
func (e *env) conversationLosses() []conversationLoss {
	e.t.Helper()
	var d chat.Conversation
	e.must(http.StatusCreated, owner, "POST", pathf("/v1/direct/%d", member), nil, &d)
	return []conversationLoss{
		{"left", e.group(owner, member), func(g int64) {
			e.must(http.StatusNoContent, member, "DELETE", pathf("/v1/conversations/%d/members/%d", g, member), nil, nil)
		}, "not_member"},
		{"removed", e.group(owner, member), func(g int64) {
			e.must(http.StatusNoContent, owner, "DELETE", pathf("/v1/conversations/%d/members/%d", g, member), nil, nil)
		}, "not_member"},
		{"blocked", d.ID, func(int64) {
			e.must(http.StatusNoContent, owner, "PUT", pathf("/v1/me/blocks/%d", member), nil, nil)
		}, "blocked"},
	}
}

// TestAnUploadTicketAskedAgainWithItsKeyAfterLosingTheConversationIsRefusedAsANewOne:
// a ticket is leave to write into its conversation, and a user who left
// it, was removed from it, or was blocked in a direct one may write
// nothing there any more: asked again with the key that made it (HTTP or
// RPC), the ticket is refused as a new ticket would be (403 not_member,
// 403 blocked), not handed out again.
func TestAnUploadTicketAskedAgainWithItsKeyAfterLosingTheConversationIsRefusedAsANewOne(t *testing.T) {
	e := newEnv(t)
	e.withAttachmentsConfig(attach.Config{})
	for _, c := range e.conversationLosses() {
		key := newID()
		body := map[string]any{"conversationId": c.conv, "name": "notes.txt", "contentType": "text/plain", "size": 10}
		if r := e.do(member, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key)); r.status != http.StatusCreated {
			t.Fatalf("%s: ticket: %d %s", c.what, r.status, r.body)
		}
		c.lose(c.conv)
		if r := e.do(member, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", newID())); r.status != http.StatusForbidden || r.errorCode() != c.code {
			t.Fatalf("%s: a new ticket: %d %s, want 403 %s", c.what, r.status, r.body, c.code)
		}
		if r := e.do(member, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key)); r.status != http.StatusForbidden || r.errorCode() != c.code {
			t.Errorf("%s: the ticket asked again with its key: %d %s, want 403 %s", c.what, r.status, r.body, c.code)
		}
		rr := e.rpc(member, "upload.create", pathf(`{"conversationId":%d,"name":"notes.txt","contentType":"text/plain","size":10,"clientMsgId":%q}`, c.conv, key))
		if rr.status != http.StatusForbidden || rr.code != c.code {
			t.Errorf("%s: the ticket asked again with its key over RPC: %s, want 403 %s", c.what, rr.raw, c.code)
		}
	}
}
