package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestAnEditClearsTheTextOfAMessageWithFilesButNotOfATextMessage: an
// edit's body obeys the send rules (docs/protocol.md), and a send with
// attachments may have an empty body, so an edit may clear the text of a
// photo sent with one (200, over HTTP and RPC), and history shows the
// message and the edit with an empty body. A text-only message keeps
// refusing an empty body (400 invalid, nothing stored): it would be a
// message of nothing.
func TestAnEditClearsTheTextOfAMessageWithFilesButNotOfATextMessage(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	const owner, member = 1, 2
	g := e.group(owner, member)
	upload := e.uploadPhoto(owner, g, mediatest.JPEG(40, 30))
	var sent struct{ Seq int64 }
	e.must(http.StatusCreated, owner, "POST", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "body": "the view", "attachments": []map[string]string{{"uploadId": upload}}}, &sent)
	text := e.sendMsg(owner, g, newID(), "words")

	// The photo's text cleared, over HTTP.
	var reply struct {
		Seq  int64
		Body *string
	}
	r := e.do(owner, "PATCH", pathf("/v1/conversations/%d/messages/%d", g, sent.Seq), map[string]any{"clientMsgId": newID(), "body": ""})
	if r.status != http.StatusOK {
		t.Fatalf("edit of a photo's text to empty: %d %s, want 200", r.status, truncate(r.body))
	}
	r.decode(t, &reply)
	if reply.Body == nil || *reply.Body != "" {
		t.Fatalf("edit of a photo's text to empty answered body %v: %s", reply.Body, r.body)
	}
	// A text put back and cleared again, over RPC.
	e.must(http.StatusOK, owner, "PATCH", pathf("/v1/conversations/%d/messages/%d", g, sent.Seq), map[string]any{"clientMsgId": newID(), "body": "again"}, nil)
	rr := e.rpc(owner, "message.edit", pathf(`{"conversationId":%d,"seq":%d,"clientMsgId":%q,"body":""}`, g, sent.Seq, newID()))
	if rr.status != http.StatusOK {
		t.Fatalf("RPC edit of a photo's text to empty: %s, want 200", rr.raw)
	}

	// A text-only message cannot be emptied, over either.
	before := queryInt(t, e.pool, `SELECT last_seq FROM conversation WHERE id = $1`, g)
	if r := e.do(owner, "PATCH", pathf("/v1/conversations/%d/messages/%d", g, text.Seq), map[string]any{"clientMsgId": newID(), "body": ""}); r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
		t.Errorf("edit of a text message to empty: %d %s, want 400 invalid", r.status, truncate(r.body))
	}
	if rr := e.rpc(owner, "message.edit", pathf(`{"conversationId":%d,"seq":%d,"clientMsgId":%q,"body":""}`, g, text.Seq, newID())); rr.status != http.StatusBadRequest || rr.code != "invalid" {
		t.Errorf("RPC edit of a text message to empty: %s, want 400 invalid", rr.raw)
	}
	if after := queryInt(t, e.pool, `SELECT last_seq FROM conversation WHERE id = $1`, g); after != before {
		t.Errorf("refused edits moved last_seq from %d to %d", before, after)
	}

	// History (the catch-up) shows the message and its last edit empty.
	var page struct{ Messages []json.RawMessage }
	e.must(http.StatusOK, member, "GET", pathf("/v1/conversations/%d/messages?afterSeq=0", g), nil, &page)
	var msg, lastEdit map[string]any
	for _, raw := range page.Messages {
		var m map[string]any
		decodeInto(t, raw, &m)
		switch {
		case m["kind"] == "message" && m["seq"] == float64(sent.Seq):
			msg = m
		case m["kind"] == "edit" && m["targetSeq"] == float64(sent.Seq):
			lastEdit = m
		}
	}
	if atts, _ := msg["attachments"].([]any); msg["body"] != "" || msg["editedAt"] == nil || len(atts) != 1 {
		t.Errorf("history's photo after its text was cleared: %v, want body \"\" with editedAt and its attachment", msg)
	}
	if body, ok := lastEdit["body"]; !ok || body != "" {
		t.Errorf("history's last edit of the photo: %v, want body \"\"", lastEdit)
	}
}

// TestAnEditWithoutABodyIsRefusedNotReadAsClearingTheText: an edit's body
// is required (docs/openapi.yaml); now that "" clears the text of a
// message with attachments, an edit that leaves body out (a client bug, a
// field misspelt in an encoder that drops empty values) must not clear it:
// 400 invalid over HTTP and RPC, nothing stored.
func TestAnEditWithoutABodyIsRefusedNotReadAsClearingTheText(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(1, 2)
	upload := e.uploadPhoto(1, g, mediatest.JPEG(40, 30))
	var sent struct{ Seq int64 }
	e.must(http.StatusCreated, 1, "POST", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "body": "the view", "attachments": []map[string]string{{"uploadId": upload}}}, &sent)

	if r := e.do(1, "PATCH", pathf("/v1/conversations/%d/messages/%d", g, sent.Seq), map[string]any{"clientMsgId": newID()}); r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
		t.Errorf("edit without a body: %d %s, want 400 invalid", r.status, truncate(r.body))
	}
	if rr := e.rpc(1, "message.edit", pathf(`{"conversationId":%d,"seq":%d,"clientMsgId":%q}`, g, sent.Seq, newID())); rr.status != http.StatusBadRequest || rr.code != "invalid" {
		t.Errorf("RPC edit without a body: %s, want 400 invalid", rr.raw)
	}
	if got := queryInt(t, e.pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND kind = 'edit'`, g); got != 0 {
		t.Errorf("refused edits stored %d entries", got)
	}
}
