package httpapi_test

import (
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// A resend of a message edited since (a client that lost the 201 while
// another device edited it) is answered with its current body and
// editedAt, as history reads it, over HTTP and RPC: the client would
// otherwise show its own unedited text as the message sent.
func TestAResentMessageEditedSinceAnswersItsCurrentBodyAndEditedAt(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	id := newID()
	path := pathf("/v1/conversations/%d/messages", g)
	first := e.sendMsg(1, g, id, "lunch at 1?")
	if first.Body != nil || first.EditedAt != nil {
		t.Fatalf("first answer %+v: a new text message echoes no body and is not edited", first)
	}
	var ed httpapi.ChangeReply
	e.must(200, 1, "PATCH", pathf("/v1/conversations/%d/messages/%d", g, first.Seq),
		map[string]string{"clientMsgId": newID(), "body": "lunch at 2?"}, &ed)

	var again httpapi.SendReply
	e.must(200, 1, "POST", path, map[string]string{"clientMsgId": id, "body": "lunch at 1?"}, &again)
	rr := e.rpc(1, "send", pathf(`{"conversationId":%d,"clientMsgId":%q,"body":"lunch at 1?"}`, g, id))
	var viaRPC httpapi.SendReply
	decodeInto(t, rr.raw, &viaRPC)
	for what, got := range map[string]httpapi.SendReply{"HTTP": again, "RPC": viaRPC} {
		if got.Seq != first.Seq || got.Body == nil || *got.Body != "lunch at 2?" || got.EditedAt == nil || !got.EditedAt.Equal(*ed.EditedAt) {
			t.Errorf("%s resend of a message edited since: %+v (body %v, editedAt %v); want seq %d, body %q, editedAt %v",
				what, got, deref(got.Body), got.EditedAt, first.Seq, "lunch at 2?", ed.EditedAt)
		}
	}
}
