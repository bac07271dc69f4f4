package chat_test

import (
	"encoding/json"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestAnEditHiddenByTheHistoryFloorIsMarkedBodyHiddenAndAnEditToEmptyIsNot:
// a reader whose history floor reaches an edit's message gets the edit
// with an empty body and bodyHidden (history and catch-up:
// HideBeforeFloor; live: BeforeFloor), and the marker survives the JSON of
// history entries; an edit that cleared the text of a message after the
// floor has an empty body and no marker, and the outbox's event (no
// reader) carries none either.
func TestAnEditHiddenByTheHistoryFloorIsMarkedBodyHiddenAndAnEditToEmptyIsNot(t *testing.T) {
	entries := []chat.Message{
		{ConversationID: 1, Seq: 10, Kind: chat.KindEdit, SenderID: 1, TargetSeq: 3, Body: "secret"},
		{ConversationID: 1, Seq: 11, Kind: chat.KindEdit, SenderID: 1, TargetSeq: 5, Body: ""},
	}
	outbox, err := chat.EncodeEvent(chat.EntryEvent(entries[0]))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(outbox), "bodyHidden") {
		t.Errorf("the outbox's event %s carries bodyHidden", outbox)
	}
	for i, want := range []bool{true, false} {
		ev, _ := chat.EntryEvent(entries[i]).BeforeFloor(4)
		b, err := chat.EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), `"bodyHidden":true`); got != want || !strings.Contains(string(b), `"body":""`) {
			t.Errorf("live, floor 4: edit of seq %d encoded %s, want body \"\" and bodyHidden %v", entries[i].TargetSeq, b, want)
		}
	}
	chat.HideBeforeFloor(entries, 4)
	for i, want := range []bool{true, false} {
		b, err := json.Marshal(entries[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), `"bodyHidden":true`); got != want || !strings.Contains(string(b), `"body":""`) {
			t.Errorf("history, floor 4: edit of seq %d encoded %s, want body \"\" and bodyHidden %v", entries[i].TargetSeq, b, want)
		}
		var back chat.Message
		if err := json.Unmarshal(b, &back); err != nil || back.BodyHidden != want {
			t.Errorf("history entry %s read back with BodyHidden %v (%v), want %v", b, back.BodyHidden, err, want)
		}
		if got := chat.EntryEvent(entries[i]).BodyHidden; got != want {
			t.Errorf("catch-up, floor 4: the event of edit of seq %d has BodyHidden %v, want %v", entries[i].TargetSeq, got, want)
		}
	}
}
