package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

func TestDecodeEventMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 4, 5, 123456000, time.UTC)
	msg := chat.Message{ConversationID: 42, Seq: 17, SenderID: 7, ClientMsgID: "6f1c2d3e-0000-4000-8000-000000000001",
		Body: `a "quoted" {body} with [brackets], \ backslash and ünïcode`, CreatedAt: at}
	var docs [][]byte
	for _, ev := range []chat.Event{
		chat.MessageEvent(msg),
		chat.MessageEvent(msg).Slim(),
		chat.DeliveryEvent(42, 9, 17),
		{Type: chat.EventConversationCreated, ConversationID: 5, Members: []int64{1, 2, 3}},
		{Type: chat.EventError, ConversationID: 7, ClientMsgID: "x", Code: chat.CodeRateLimited, Message: "rate limited: {retry} in 100ms"},
		{Type: chat.EventPresence, UserID: 9},
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	docs = append(docs,
		[]byte(` { "type" : "message.new" , "seq" : 3 , "nested" : {"a":[1,{"b":"}"}]}, "conversationId":1 } `),
		[]byte(`{"type":null,"seq":null}`),
		[]byte(`{}`),
		[]byte(`{"clientMsgId":"with \"escape\""}`),  // falls back
		[]byte(`{"type":"ok","seq":"not a number"}`), // falls back, and fails like encoding/json
		[]byte(`{"type":"x",}`),
		[]byte(`not json`),
	)
	for _, b := range docs {
		var want, got event
		wantErr := json.Unmarshal(b, &want)
		gotErr := decodeEvent(b, &got)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("%s: error %v, encoding/json says %v", b, gotErr, wantErr)
		}
		if wantErr == nil && got != want {
			t.Fatalf("%s:\n got %+v\nwant %+v", b, got, want)
		}
	}
	// The fast path is the one taken for what chatd sends.
	for _, b := range docs[:6] {
		var ev event
		if !scanEvent(b, &ev) {
			t.Fatalf("%s went to encoding/json", b)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"message.new","conversationId":1,"seq":2,"senderId":3,"clientMsgId":"a","body":"b"}`))
	f.Add([]byte(`{"type":"conversation.created","members":[1,2,{"x":"]"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got event
		err := decodeEvent(b, &got)
		if !json.Valid(b) {
			return // not validated in skipped values; only must not panic
		}
		var want event
		wantErr := json.Unmarshal(b, &want)
		if wantErr == nil && err == nil && got != want && exactKeys(b) {
			t.Fatalf("%q: got %+v, want %+v", b, got, want)
		}
	})
}

// exactKeys reports whether every key of b's top-level object that names
// an event field case-insensitively names it exactly (encoding/json folds
// case; chatd never sends such keys).
func exactKeys(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return true
	}
	for k := range m {
		for _, f := range []string{"type", "conversationId", "seq", "senderId", "clientMsgId", "code"} {
			if k != f && strings.EqualFold(k, f) {
				return false
			}
		}
	}
	return true
}
