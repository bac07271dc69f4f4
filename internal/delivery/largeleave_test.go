package delivery_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// A connected session of a member removed from a large group (its live
// entries go out without their content) whose window is full when the
// removal comes gets the entries still queued for it up to the removal
// whole once it acknowledges: queued slim, they would have been the
// user's to read through history, which refuses them now. What went out
// before the removal went out slim, as to every member.
func TestAConnectedMemberRemovedFromALargeGroupGetsTheEntriesQueuedBeforeTheRemovalWithTheirBodies(t *testing.T) {
	f := setup(t)
	h := startHub(t, f.sessions, delivery.Options{LargeGroup: 1, Window: 2})
	u2 := attach(t, h, f, "u2", false, false)     // acknowledges nothing yet
	laptop := attach(t, h, f, "u2b", false, true) // user 2's other device
	evs := f.send(t, 5)
	publishEach(h, evs)
	waitSeqs(t, u2, f.conv.ID, 2) // the window is full: the rest waits queued, slim
	removeAndTell(t, h, f)
	// The fan-out hands the leave to both sessions of user 2 at once: once
	// the laptop wrote member.removed, the phone's session has the leave
	// in its mailbox; it has taken it once the mailbox is empty.
	testkit.WaitFor(t, 10*time.Second, "the laptop to receive member.removed", func() bool {
		return slices.ContainsFunc(laptop.packets(), func(p chat.Packet) bool {
			var ev chat.Event
			return json.Unmarshal(p.Payload, &ev) == nil && ev.Type == chat.EventMemberRemoved
		})
	})
	phone := h.Session("u2")
	testkit.WaitFor(t, 10*time.Second, "the phone's session to take the leave", func() bool { return phone.Queued() == 0 && !phone.Pumping() })
	acked := 0
	testkit.WaitFor(t, 10*time.Second, "user 2 to receive the 5 messages sent before the removal", func() bool {
		acked = ackAll(h, "u2", u2, acked)
		return len(u2.seqs(f.conv.ID)) >= len(evs)
	})
	for i, sent := range evs {
		got := waitEntry(t, u2, f.conv.ID, sent.Seq)
		whole := got.Body != nil && *got.Body == fmt.Sprint("m", i) && got.ClientMsgID == sent.ClientMsgID
		if i < 2 && got.Body != nil {
			t.Errorf("message %d, sent before the removal, came with its body %q: want it slim", sent.Seq, body(got))
		}
		if i >= 2 && !whole {
			t.Errorf("message %d, queued at the removal, came with body %s and clientMsgId %q: want %q and %q",
				sent.Seq, body(got), got.ClientMsgID, fmt.Sprint("m", i), sent.ClientMsgID)
		}
	}
}
