package presence

import (
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
)

// A hide and a show of one user that wait for the same round (the tracker
// was busy: a slow database, a burst of connections) are both announced:
// the hidden event to whom the user now hides from, the current state to
// their watchers. A user who blocks someone (hidden from them) and then
// unblocks another, or saves their settings with presence on, must not
// leave the one they blocked shown online for good (nobody would tell
// them otherwise: they watch the user no more).
func TestAHideAndAShowWaitingForOneRoundAreBothAnnounced(t *testing.T) {
	tr, st, hub := newTracker(t, Config{})
	release := holdWatchers(t, st)
	// User 1 shown again: the tracker takes it and waits for 1's watchers.
	tr.PresenceVisibilityChanged(1, false)
	testkit.WaitFor(t, 5*time.Second, "the first change taken", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.visibility) == 0
	})
	tr.PresenceVisibilityChanged(2, true)  // user 2 blocks someone
	tr.PresenceVisibilityChanged(2, false) // and unblocks someone else
	release()
	waitEvents(t, hub, 3)
	var hidden, shown int
	for _, ev := range hub.events() {
		switch {
		case ev.UserID != 2:
		case ev.Hidden && len(ev.To) == 1 && ev.To[0] == 200:
			hidden++
		case !ev.Hidden && len(ev.To) == 1 && ev.To[0] == 100:
			shown++
		default:
			t.Fatalf("user 2's event %+v, want hidden to 200 or the state to 100", ev)
		}
	}
	if hidden != 1 || shown != 1 {
		t.Fatalf("user 2: %d hidden and %d shown events, want 1 of each: %+v", hidden, shown, hub.events())
	}
}
