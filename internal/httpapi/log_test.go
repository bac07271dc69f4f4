package httpapi_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// TestAccessLog: one debug record per request with method, route pattern,
// status, duration and user id, and never a body or a token.
func TestAccessLog(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	const body = "top-secret-message-body"
	token := e.token(1)
	e.sendMsg(1, g, newID(), body)
	e.do(0, "GET", "/v1/inbox", nil, withHeader("Authorization", "Bearer "+token))
	e.do(0, "GET", "/v1/inbox", nil, withHeader("Authorization", "Bearer "+token+"x"))
	e.do(1, "PUT", "/v1/inbox", nil)
	e.rpc(2, "history", pathf(`{"conversationId":%d}`, g))
	e.rpc(2, "no-such-method-"+body, `{}`)

	logs := e.logs.String()
	if containsAny(logs, body, token, "Bearer") {
		t.Fatalf("log holds a body or token:\n%s", logs)
	}
	type record struct {
		Msg      string `json:"msg"`
		Level    string `json:"level"`
		Method   string `json:"method"`
		Pattern  string `json:"pattern"`
		Status   int    `json:"status"`
		User     int64  `json:"user"`
		Duration *int64 `json:"duration"`
	}
	var recs []record
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if r.Msg == "http request" || r.Msg == "rpc request" {
			recs = append(recs, r)
		}
	}
	want := []record{
		{Msg: "http request", Method: "POST", Pattern: "POST /v1/conversations", Status: 201, User: 1},
		{Msg: "http request", Method: "POST", Pattern: "POST /v1/conversations/{id}/messages", Status: 201, User: 1},
		{Msg: "http request", Method: "GET", Pattern: "GET /v1/inbox", Status: 200, User: 1},
		{Msg: "http request", Method: "GET", Pattern: "GET /v1/inbox", Status: 401, User: 0},
		{Msg: "http request", Method: "PUT", Pattern: "unmatched", Status: 405, User: 0},
		{Msg: "rpc request", Method: "history", Status: 200, User: 2},
		{Msg: "rpc request", Method: "unknown", Status: 404, User: 2},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d access records, want %d:\n%s", len(recs), len(want), logs)
	}
	for i, w := range want {
		r := recs[i]
		if r.Msg != w.Msg || r.Method != w.Method || r.Pattern != w.Pattern || r.Status != w.Status || r.User != w.User ||
			r.Level != "DEBUG" || r.Duration == nil {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
}
