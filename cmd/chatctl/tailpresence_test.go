package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestTailTellsAHiddenPresenceFromAnOfflineOne: a presence event saying
// the user's presence is hidden from you (they turned it off, or blocked
// you) is not "went offline": they may be online.
func TestTailTellsAHiddenPresenceFromAnOfflineOne(t *testing.T) {
	on, off := true, false
	at := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ev   client.Event
		want string
	}{
		{client.Event{Type: client.EventPresence, UserID: 2, Online: &on, LastSeen: &at}, "user 2 is online\n"},
		{client.Event{Type: client.EventPresence, UserID: 2, Online: &off, LastSeen: &at}, "user 2 went offline\n"},
		{client.Event{Type: client.EventPresence, UserID: 2, Online: &off, Hidden: true}, "user 2 hides their presence from you\n"},
	} {
		var b strings.Builder
		if err := printEvent(&b, c.ev, false); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Fatalf("printed %q, want %q", b.String(), c.want)
		}
	}
}

// TestTailTellsAHiddenEditFromAClearedText: an edit whose text is hidden
// from you (its message is from before your join to a group whose history
// is "joined") is not one that cleared the text.
func TestTailTellsAHiddenEditFromAClearedText(t *testing.T) {
	for _, c := range []struct {
		ev   client.Event
		want string
	}{
		{client.Event{Type: client.EventMessageEdited, ConversationID: 3, Seq: 43, TargetSeq: 42, SenderID: 1, Body: ""}, "[conv 3 #43] user 1 edited #42: \n"},
		{client.Event{Type: client.EventMessageEdited, ConversationID: 3, Seq: 43, TargetSeq: 42, SenderID: 1, BodyHidden: true}, "[conv 3 #43] user 1 edited #42 (its text is hidden from you)\n"},
	} {
		var b strings.Builder
		if err := printEvent(&b, c.ev, false); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Fatalf("printed %q, want %q", b.String(), c.want)
		}
	}
}
