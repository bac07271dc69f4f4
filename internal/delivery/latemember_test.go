package delivery_test

import (
	"testing"

	"github.com/chatd/chatd/internal/delivery"
)

// A member removed and added back, whose removal then arrives again (the
// old relay leader's batch landing late, Kafka redelivering): the late
// removal neither drops them from the member index nor ends their stream,
// and what is sent next reaches them live.
func TestALateDuplicateRemovalAfterTheRejoinKeepsTheMemberLive(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{})
	u := attach(t, h, f, "phone", false, false)
	want := sendSeqs(t, h, f, 1)
	removed := removeEvent(t, f)
	h.Publish(removed)
	away := sendSeqs(t, h, f, 1)
	join(t, h, f, 2)
	want = append(want, sendSeqs(t, h, f, 1)...)
	h.Publish(removed) // again, late
	want = append(want, sendSeqs(t, h, f, 1)...)
	ackAndWant(t, h, f, u, want, away)
}
