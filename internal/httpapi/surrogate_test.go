package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// TestALoneSurrogateEscapeIsRefusedNotStoredAsAReplacementCharacter: a
// \u escape of half a surrogate pair names no character; encoding/json
// would store U+FFFD in its place, the silent alteration invalid UTF-8 is
// refused for. Over HTTP and RPC alike it is 400 invalid and nothing is
// stored; a whole pair (👍 as \ud83d\udc4d) is the character it spells.
func TestALoneSurrogateEscapeIsRefusedNotStoredAsAReplacementCharacter(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	msgs := pathf("/v1/conversations/%d/messages", g)
	for _, body := range []string{`a\ud800b`, `\udc00`, `\ud83d`, `\ud83d\ud83d`, `x\uDBFF\u0041`} {
		r := e.do(1, "POST", msgs, `{"clientMsgId":"`+newID()+`","body":"`+body+`"}`)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
			t.Errorf("POST body %q: %d %s, want 400 invalid", body, r.status, truncate(r.body))
		}
		rr := e.rpc(1, "send", pathf(`{"conversationId":%d,"clientMsgId":%q,"body":"%s"}`, g, newID(), body))
		if rr.status != http.StatusBadRequest || rr.code != "invalid" {
			t.Errorf("RPC send body %q: %s, want 400 invalid", body, rr.raw)
		}
	}
	r := e.do(1, "PATCH", pathf("/v1/conversations/%d", g), `{"about":"\ud800"}`)
	if r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
		t.Errorf("PATCH about lone surrogate: %d %s, want 400 invalid", r.status, truncate(r.body))
	}
	var h httpapi.HistoryReply
	e.must(http.StatusOK, 1, "GET", msgs, nil, &h)
	if len(h.Messages) != 0 {
		t.Fatalf("a refused body was stored: %+v", h.Messages)
	}

	rep := e.sendMsg(1, g, newID(), "\U0001F44D")
	e.must(http.StatusCreated, 1, "POST", msgs, `{"clientMsgId":"`+newID()+`","body":"\ud83d\udc4d \uD83D\uDC4D"}`, nil)
	e.must(http.StatusOK, 1, "GET", msgs, nil, &h)
	if len(h.Messages) != 2 || h.Messages[0].Seq != rep.Seq || h.Messages[1].Body != "\U0001F44D \U0001F44D" {
		t.Fatalf("a whole surrogate pair: history %+v", h.Messages)
	}
}
