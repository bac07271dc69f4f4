package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// A clientMsgId or Idempotency-Key is a UUID in either letter case, kept
// in canonical form (docs/protocol.md): the answer carries it lower case,
// over HTTP and RPC, and a resend in the other case is the same key, a
// duplicate; a group create's key is one key whichever case and
// transport repeat it.
func TestAnUpperCaseClientMsgIDIsAnsweredLowerCaseAndIsTheSameKey(t *testing.T) {
	e := newEnv(t)
	g := e.group(owner, member)
	upper := strings.ToUpper(newID())
	var first, again httpapi.SendReply
	e.must(http.StatusCreated, owner, "POST", pathf("/v1/conversations/%d/messages", g), map[string]string{"clientMsgId": upper, "body": "hi"}, &first)
	if first.ClientMsgID != strings.ToLower(upper) {
		t.Fatalf("sent %s, answered clientMsgId %s, want it lower case", upper, first.ClientMsgID)
	}
	e.must(http.StatusOK, owner, "POST", pathf("/v1/conversations/%d/messages", g), map[string]string{"clientMsgId": strings.ToLower(upper), "body": "hi"}, &again)
	if again.Seq != first.Seq {
		t.Fatalf("the lower-case resend got seq %d, the first %d", again.Seq, first.Seq)
	}

	key := strings.ToUpper(newID())
	r := e.rpc(owner, "message.recall", pathf(`{"conversationId":%d,"seq":%d,"clientMsgId":"%s"}`, g, first.Seq, key))
	if r.status != http.StatusOK || !strings.Contains(string(r.raw), `"clientMsgId":"`+strings.ToLower(key)+`"`) {
		t.Fatalf("recall with an upper-case clientMsgId over RPC: %s, want it answered lower case", r.raw)
	}

	key = strings.ToUpper(newID())
	body := map[string]any{"type": "group", "title": "k", "members": []int64{member}}
	r1 := e.do(owner, "POST", "/v1/conversations", body, withHeader("Idempotency-Key", key))
	if r1.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r1.status, r1.body)
	}
	r2 := e.rpc(owner, "conversation.create", `{"type":"group","title":"k","members":[2],"clientMsgId":"`+strings.ToLower(key)+`"}`)
	if r2.status != http.StatusOK {
		t.Fatalf("the create repeated over RPC with its key lower case: %s, want 200 with the group made", r2.raw)
	}
}
