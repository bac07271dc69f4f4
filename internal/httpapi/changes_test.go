package httpapi_test

import (
	"net/url"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// TestAnIdempotencyKeyReusedForAnotherReactionIs409: the key names one
// reaction change; the same key for another emoji or for the removal is
// refused and stores nothing, while the very same request is a duplicate.
func TestAnIdempotencyKeyReusedForAnotherReactionIs409(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	m := e.sendMsg(1, g, newID(), "target")
	key := withHeader("Idempotency-Key", newID())
	reaction := func(emoji string) string {
		return pathf("/v1/conversations/%d/messages/%d/reactions/%s", g, m.Seq, url.PathEscape(emoji))
	}

	r := e.do(2, "PUT", reaction("👍"), nil, key)
	if r.status != 200 {
		t.Fatalf("first reaction: %d %s", r.status, r.body)
	}
	var first httpapi.ChangeReply
	r.decode(t, &first)
	for _, c := range []struct{ name, method, emoji string }{
		{"another emoji", "PUT", "👎"},
		{"the removal", "DELETE", "👍"},
	} {
		if r := e.do(2, c.method, reaction(c.emoji), nil, key); r.status != 409 || r.errorCode() != "conflict" {
			t.Errorf("%s with the first reaction's key: %d %s, want 409 conflict", c.name, r.status, r.body)
		}
	}
	var again httpapi.ChangeReply
	if r := e.do(2, "PUT", reaction("👍"), nil, key); r.status != 200 {
		t.Fatalf("resend: %d %s", r.status, r.body)
	} else {
		r.decode(t, &again)
	}
	if !again.Duplicate || again.Seq != first.Seq || again.Emoji != "👍" || again.On == nil || !*again.On {
		t.Fatalf("resend: %+v, want a duplicate of %+v", again, first)
	}
	var h httpapi.HistoryReply
	e.must(200, 1, "GET", pathf("/v1/conversations/%d/messages", g), nil, &h)
	if len(h.Messages) != 2 {
		t.Fatalf("history holds %d entries, want the message and one reaction", len(h.Messages))
	}
}

// TestRecallingARecalledMessageAnswersTheFirstRecallsClientMsgID: the
// second recall is answered with the first one's seq, clientMsgId and time,
// not a mix of the first's seq and the second request's key.
func TestRecallingARecalledMessageAnswersTheFirstRecallsClientMsgID(t *testing.T) {
	e := newEnvWith(t, envConfig{limits: chat.DefaultLimits()})
	g := e.group(1, 2)
	m := e.sendMsg(2, g, newID(), "soon gone")
	path := pathf("/v1/conversations/%d/messages/%d", g, m.Seq)
	firstKey := newID()
	var first, again httpapi.ChangeReply
	if r := e.do(2, "DELETE", path, nil, withHeader("Idempotency-Key", firstKey)); r.status != 200 {
		t.Fatalf("recall: %d %s", r.status, r.body)
	} else {
		r.decode(t, &first)
	}
	if r := e.do(1, "DELETE", path, nil, withHeader("Idempotency-Key", newID())); r.status != 200 {
		t.Fatalf("recall again: %d %s", r.status, r.body)
	} else {
		r.decode(t, &again)
	}
	if !again.Unchanged || again.Seq != first.Seq || again.ClientMsgID != firstKey ||
		again.RecalledAt == nil || first.RecalledAt == nil || !again.RecalledAt.Equal(*first.RecalledAt) {
		t.Fatalf("recall again: %+v, want unchanged and the first recall %+v", again, first)
	}
}

// TestAReactionPUTWithABodyIsRefusedNotSet: PUT .../reactions/{emoji} takes
// no body, and a body with fields (the RPC payload's {"on":false}, say) is
// 400 like any unknown field, and a non-JSON one 415, instead of being
// ignored: the request meant to remove the reaction must not set it.
// POST /v1/uploads/{id}/complete and DELETE routes, which take no body
// either, refuse one alike; an empty body or {} stays accepted.
func TestAReactionPUTWithABodyIsRefusedNotSet(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	m := e.sendMsg(1, g, newID(), "target")
	path := pathf("/v1/conversations/%d/messages/%d/reactions/%s", g, m.Seq, url.PathEscape("👍"))
	if r := e.do(2, "PUT", path, `{"on":false}`); r.status != 400 || r.errorCode() != "invalid" {
		t.Errorf(`PUT with {"on":false}: %d %s, want 400 invalid`, r.status, r.body)
	}
	if r := e.do(2, "PUT", path, `{}`, withHeader("Content-Type", "text/plain")); r.status != 415 {
		t.Errorf("PUT with a text/plain body: %d %s, want 415", r.status, r.body)
	}
	var h httpapi.HistoryReply
	e.must(200, 1, "GET", pathf("/v1/conversations/%d/messages", g), nil, &h)
	if len(h.Messages) != 1 || len(h.Messages[0].Reactions) != 0 {
		t.Fatalf("history after refused PUTs: %+v, want the message alone, without reactions", h.Messages)
	}
	e.must(200, 2, "PUT", path, `{}`, nil)
	e.must(200, 2, "PUT", path, nil, nil)

	complete := "/v1/uploads/" + strings.Repeat("a", 26) + "/complete"
	if r := e.do(2, "POST", complete, `{"size":1}`); r.status != 400 || r.errorCode() != "invalid" {
		t.Errorf("POST complete with a body: %d %s, want 400 invalid", r.status, r.body)
	}

	// A DELETE takes none either: a recall with {"clientMsgId"} in its
	// body (the key goes in the Idempotency-Key header) is refused and
	// recalls nothing; with no body or {} it recalls.
	recall := pathf("/v1/conversations/%d/messages/%d", g, m.Seq)
	if r := e.do(1, "DELETE", recall, map[string]any{"clientMsgId": newID()}); r.status != 400 || r.errorCode() != "invalid" {
		t.Errorf("DELETE with a body: %d %s, want 400 invalid", r.status, r.body)
	}
	e.must(200, 1, "GET", pathf("/v1/conversations/%d/messages", g), nil, &h)
	if len(h.Messages) != 2 || h.Messages[0].Recalled {
		t.Fatalf("history after a refused DELETE: %+v, want the message not recalled", h.Messages)
	}
	e.must(200, 1, "DELETE", recall, `{}`, nil)
}
