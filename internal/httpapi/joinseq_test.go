package httpapi_test

import (
	"bytes"
	"encoding/json"
	"testing"

	chat "github.com/chatd/chatd"
)

// The inbox and GET /v1/conversations/{id} (and their RPC twins) tell
// the caller where their current membership starts, joinSeq: the
// conversation's last seq when they were added (their member.added entry
// is the next one), in a group whose history is "joined" or "all", again
// after a removal and re-add; 0 for a group created with them and a
// direct conversation. PATCH's answer says it too.
func TestTheInboxAndTheConversationSayWhereTheCallersMembershipStarts(t *testing.T) {
	e := newEnv(t)
	lastSeq := func(conv int64) int64 {
		var c chat.Conversation
		e.must(200, 1, "GET", pathf("/v1/conversations/%d", conv), nil, &c)
		return c.LastSeq
	}
	add := func(conv, user int64) int64 {
		join := lastSeq(conv)
		e.must(201, 1, "POST", pathf("/v1/conversations/%d/members", conv), map[string]int64{"userId": user}, nil)
		return join
	}
	created := e.group(1, 3)
	e.sendMsg(1, created, newID(), "in the group created with 3")

	joined := e.group(1)
	e.sendMsg(1, joined, newID(), "before 3's first join")
	add(joined, 3)
	e.sendMsg(1, joined, newID(), "while 3 is in")
	e.must(204, 1, "DELETE", pathf("/v1/conversations/%d/members/3", joined), nil, nil)
	e.sendMsg(1, joined, newID(), "while 3 is away")
	rejoin := add(joined, 3)
	e.sendMsg(1, joined, newID(), "after 3's second join")

	all := e.group(1)
	e.must(200, 1, "PATCH", pathf("/v1/conversations/%d", all), map[string]string{"historyVisible": "all"}, nil)
	e.sendMsg(1, all, newID(), "before 3's join")
	e.sendMsg(1, all, newID(), "before 3's join, too")
	allJoin := add(all, 3)

	var direct chat.Conversation
	e.must(201, 1, "POST", "/v1/direct/3", nil, &direct)
	e.sendMsg(1, direct.ID, newID(), "direct")

	want := map[int64]int64{created: 0, joined: rejoin, all: allJoin, direct.ID: 0}
	if rejoin == 0 || allJoin == 0 {
		t.Fatalf("the joins to check are at 0: %v", want)
	}
	check := func(how string, conv int64, obj map[string]any) {
		t.Helper()
		raw, ok := obj["joinSeq"]
		if !ok {
			t.Errorf("%s of conversation %d: no joinSeq in %v; want %d", how, conv, obj, want[conv])
			return
		}
		if got, _ := raw.(json.Number).Int64(); got != want[conv] {
			t.Errorf("%s of conversation %d: joinSeq %v, want %d", how, conv, raw, want[conv])
		}
	}
	decode := func(raw []byte) map[string]any {
		t.Helper()
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		return m
	}
	inboxOf := func(how string, raw []byte) {
		t.Helper()
		convs, _ := decode(raw)["conversations"].([]any)
		if len(convs) != len(want) {
			t.Fatalf("%s: %d conversations, want %d: %s", how, len(convs), len(want), raw)
		}
		for _, c := range convs {
			obj := c.(map[string]any)
			id, _ := obj["id"].(json.Number).Int64()
			check(how, id, obj)
		}
	}
	inboxOf("GET /v1/inbox", e.must(200, 3, "GET", "/v1/inbox", nil, nil).body)
	rr := e.rpc(3, "inbox", `{}`)
	if rr.status != 200 {
		t.Fatalf("rpc inbox: %s", rr.raw)
	}
	inboxOf("rpc inbox", rr.raw)
	for conv := range want {
		check("GET /v1/conversations/{id}", conv, decode(e.must(200, 3, "GET", pathf("/v1/conversations/%d", conv), nil, nil).body))
		rr := e.rpc(3, "conversation.get", pathf(`{"conversationId":%d}`, conv))
		if rr.status != 200 {
			t.Fatalf("rpc conversation.get %d: %s", conv, rr.raw)
		}
		check("rpc conversation.get", conv, decode(rr.raw))
	}
	e.promote(joined, 3)
	check("PATCH /v1/conversations/{id}", joined,
		decode(e.must(200, 3, "PATCH", pathf("/v1/conversations/%d", joined), map[string]string{"title": "renamed by 3"}, nil).body))
}
