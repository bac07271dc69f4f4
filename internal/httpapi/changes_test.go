package httpapi_test

import (
	"net/url"
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
