package httpapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// TestSendIdempotency: a clientMsgId names one message. The same sender's
// resend (over HTTP or RPC, in any letter case) is 200 with the original seq;
// another sender's use of it is 409.
func TestSendIdempotency(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	id := newID()
	path := pathf("/v1/conversations/%d/messages", g)

	var first, again httpapi.SendReply
	e.must(201, 1, "POST", path, map[string]string{"clientMsgId": id, "body": "hello"}, &first)
	if first.ConversationID != g || first.Seq != 1 || first.ClientMsgID != id || first.CreatedAt.IsZero() {
		t.Fatalf("first send: %+v", first)
	}
	e.must(200, 1, "POST", path, map[string]string{"clientMsgId": id, "body": "hello"}, &again)
	if !reflect.DeepEqual(again, first) {
		t.Fatalf("resend: %+v, want %+v", again, first)
	}
	// UUIDs compare canonically: the upper-case spelling is the same id.
	e.must(200, 1, "POST", path, map[string]string{"clientMsgId": strings.ToUpper(id), "body": "hello"}, &again)
	if !reflect.DeepEqual(again, first) {
		t.Fatalf("upper-case resend: %+v, want %+v", again, first)
	}
	rr := e.rpc(1, "send", pathf(`{"conversationId":%d,"clientMsgId":%q,"body":"hello"}`, g, id))
	var viaRPC httpapi.SendReply
	decodeInto(t, rr.raw, &viaRPC)
	if rr.status != 200 || !reflect.DeepEqual(viaRPC, first) {
		t.Fatalf("rpc resend: %s, want seq %d", rr.raw, first.Seq)
	}

	r := e.do(2, "POST", path, map[string]string{"clientMsgId": id, "body": "mine"})
	if r.status != 409 || r.errorCode() != "conflict" {
		t.Fatalf("other sender reuses the id: %d %s", r.status, r.body)
	}

	var h httpapi.HistoryReply
	e.must(200, 2, "GET", path, nil, &h)
	if len(h.Messages) != 1 || h.Messages[0].Body != "hello" || h.Messages[0].SenderID != 1 {
		t.Fatalf("history after resends: %+v", h.Messages)
	}
	// The next new message gets the next seq: duplicates used none.
	if rep := e.sendMsg(2, g, newID(), "next"); rep.Seq != 2 {
		t.Fatalf("next seq %d, want 2", rep.Seq)
	}
}

// A resend of a reply or of a forward (a client that lost the 201 and
// retries) answers the message it sent: 200 with the first answer's
// replyTo, or forwardedFrom and the copied body (which the client did
// not send and has nowhere else), over HTTP and over RPC.
func TestAResentReplyOrForwardAnswersItsReplyToOrForwardedFrom(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	other := e.group(1)
	src := e.sendMsg(2, g, newID(), "the deploy key rotates on Friday")
	for _, c := range []struct {
		what string
		conv int64
		body map[string]any
	}{
		{"reply", g, map[string]any{"clientMsgId": newID(), "body": "noted", "replyTo": src.Seq}},
		{"forward", other, map[string]any{"clientMsgId": newID(), "forward": map[string]any{"conversationId": g, "seq": src.Seq}}},
	} {
		path := pathf("/v1/conversations/%d/messages", c.conv)
		var first, again httpapi.SendReply
		e.must(201, 1, "POST", path, c.body, &first)
		if first.ReplyTo == nil && first.ForwardedFrom == nil {
			t.Fatalf("%s: the first answer %+v carries neither replyTo nor forwardedFrom", c.what, first)
		}
		e.must(200, 1, "POST", path, c.body, &again)
		if !reflect.DeepEqual(again, first) {
			t.Errorf("%s resent over HTTP: %+v, want the first answer %+v", c.what, again, first)
		}
		payload := map[string]any{"conversationId": c.conv}
		for k, v := range c.body {
			payload[k] = v
		}
		raw, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		rr := e.rpc(1, "send", string(raw))
		var viaRPC httpapi.SendReply
		decodeInto(t, rr.raw, &viaRPC)
		if rr.status != 200 || !reflect.DeepEqual(viaRPC, first) {
			t.Errorf("%s resent over RPC: %s, want the first answer %+v", c.what, rr.raw, first)
		}
	}
	// The clientMsgId of a reply reused for a reply to another message is
	// another change, as an edit's for another target is: 409.
	id := newID()
	path := pathf("/v1/conversations/%d/messages", g)
	e.must(201, 1, "POST", path, map[string]any{"clientMsgId": id, "body": "noted", "replyTo": src.Seq}, nil)
	other2 := e.sendMsg(2, g, newID(), "another")
	if r := e.do(1, "POST", path, map[string]any{"clientMsgId": id, "body": "noted", "replyTo": other2.Seq}); r.status != 409 || r.errorCode() != "conflict" {
		t.Errorf("the reply's clientMsgId reused to reply to another message: %d %s, want 409 conflict", r.status, r.body)
	}
}

// A send is a reply or a forward, not both: the answer, events and
// clients show one reference, so a message stored with both showed its
// sender a forward whose reply everyone else saw. Refused over HTTP and
// RPC alike, nothing stored.
func TestAForwardThatAlsoRepliesIsRefused(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	src := e.sendMsg(2, g, newID(), "the deploy key rotates on Friday")
	path := pathf("/v1/conversations/%d/messages", g)
	body := map[string]any{"clientMsgId": newID(), "replyTo": src.Seq, "forward": map[string]any{"conversationId": g, "seq": src.Seq}}
	if r := e.do(1, "POST", path, body); r.status != 400 || r.errorCode() != "invalid" {
		t.Fatalf("a forward that also replies: %d %s, want 400 invalid", r.status, r.body)
	}
	rr := e.rpc(1, "send", pathf(`{"conversationId":%d,"clientMsgId":%q,"replyTo":%d,"forward":{"conversationId":%d,"seq":%d}}`, g, newID(), src.Seq, g, src.Seq))
	if rr.status != 400 {
		t.Fatalf("over RPC: %s, want 400", rr.raw)
	}
	var h httpapi.HistoryReply
	e.must(200, 1, "GET", path, nil, &h)
	if len(h.Messages) != 1 {
		t.Fatalf("history holds %d entries, want the source alone", len(h.Messages))
	}
}
