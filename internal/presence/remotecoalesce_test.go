package presence

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Presence events from other nodes that wait while the tracker is slow
// keep the latest of each user: a user who went offline after the queue
// filled is shown offline here, not left online by a dropped event, and
// their earlier changes are not pushed after it.
func TestAFullRemotePresenceQueueKeepsEachUsersLatestEvent(t *testing.T) {
	remote, release, hub := stalledRemote(t, prometheus.NewRegistry())
	remote(2, false)
	remote(2, true)
	for i := range remoteQueue - 1 {
		remote(int64(i+3), true)
	}
	remote(2, false) // the queue is full of other users
	release()
	evs := waitEvents(t, hub, 1+remoteQueue)
	var got []bool
	for _, ev := range evs {
		if ev.UserID == 2 {
			got = append(got, *ev.Online)
		}
	}
	if len(got) != 1 || got[0] {
		t.Fatalf("user 2's events pushed (online): %v, want only the latest [false]", got)
	}
}
