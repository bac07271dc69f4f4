package client

import (
	"encoding/json"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestAnEventsBodyHiddenReachesTheApplication: the events topic's
// message.edited with "bodyHidden":true reaches the application (and
// View) marked, one without it unmarked: the two have "body":"" alike.
func TestAnEventsBodyHiddenReachesTheApplication(t *testing.T) {
	for payload, want := range map[string]bool{
		`{"type":"message.edited","conversationId":7,"seq":6,"targetSeq":2,"senderId":1,"body":"","bodyHidden":true}`: true,
		`{"type":"message.edited","conversationId":7,"seq":6,"targetSeq":2,"senderId":1,"body":""}`:                   false,
	} {
		var w chat.Event
		if err := json.Unmarshal([]byte(payload), &w); err != nil {
			t.Fatal(err)
		}
		if got := eventOf(w).BodyHidden; got != want {
			t.Errorf("%s: BodyHidden %v, want %v", payload, got, want)
		}
	}
}
