package push_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/webpushtest"
)

// versioned is what a device orders a conversation's texts by: the
// notification's seq and the edit its text is of (editSeq, docs/events.md).
type versioned struct {
	Type    string `json:"type"`
	Seq     int64  `json:"seq"`
	EditSeq int64  `json:"editSeq"`
	Body    string `json:"body"`
}

func versions(t *testing.T, ps []webpushtest.Push) []versioned {
	t.Helper()
	out := make([]versioned, len(ps))
	for i, p := range ps {
		if err := json.Unmarshal(p.Plaintext, &out[i]); err != nil {
			t.Fatalf("payload %q: %v", p.Plaintext, err)
		}
	}
	return out
}

// shownAfter is the text a device shows after it got ns in that order, by
// the rule docs/events.md gives apps: an update puts its text in the
// notification showing its message unless that text is of the same or a
// newer edit.
func shownAfter(ns ...versioned) string {
	var shown versioned
	for _, n := range ns {
		switch {
		case n.Type == push.TypeMessage:
			shown = n
		case n.Type == push.TypeUpdate && n.Seq == shown.Seq && n.EditSeq > shown.EditSeq:
			shown.Body, shown.EditSeq = n.Body, n.EditSeq
		}
	}
	return shown.Body
}

// TestUpdatesOfOneMessageSayWhichTextIsNewer: the message a notification
// previews is edited twice, the second time after the first edit's update
// was sent, so bob's devices get two updates. A push service keeps no
// order between them (they have no Topic): each carries the seq of the
// edit its text is of, so a device that gets the second update first
// keeps its text when the first comes.
func TestUpdatesOfOneMessageSayWhichTextIsNewer(t *testing.T) {
	t.Parallel()
	r, conv, seq := previewShownToBob(t, "meet at 5, pin 4711")
	first := r.edit(conv, 1, seq, "meet at 5")
	r.waitPushes("bob", 2, 3*time.Second)
	second := r.edit(conv, 1, seq, "meet at 6")
	r.waitPushes("bob", 3, 3*time.Second)
	got := versions(t, r.ep.Of("bob"))
	note, older, newer := got[0], got[1], got[2]
	if older.Type != push.TypeUpdate || older.Body != "meet at 5" || newer.Type != push.TypeUpdate || newer.Body != "meet at 6" {
		t.Fatalf("bob's pushes %+v, want the notification and an update for each edit", got)
	}
	if older.EditSeq != first || newer.EditSeq != second || note.EditSeq != 0 {
		t.Errorf("editSeq: notification %d, updates %d then %d; want 0 (not edited), %d, %d (the edits): "+
			"a device that gets the updates out of order cannot tell the newer text", note.EditSeq, older.EditSeq, newer.EditSeq, first, second)
	}
	if text := shownAfter(note, newer, older); text != "meet at 6" {
		t.Errorf("a device that got the second update first shows %q, want %q", text, "meet at 6")
	}
}
