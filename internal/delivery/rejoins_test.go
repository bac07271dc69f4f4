package delivery_test

import (
	"testing"

	"github.com/chatd/chatd/internal/delivery"
)

// A connected member removed, added back, removed and added back again
// while the client still has not acknowledged what the first membership
// owed: the session finishes that tail, then follows each membership in
// turn, and the last one stays live (the third join used to be ignored:
// the stream ended at the second removal, and what followed never came).
func TestAMemberAddedBackTwiceWhileTheOldTailIsUnacknowledgedFollowsTheLastMembership(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 3})
	u := attach(t, h, f, "phone", false, false) // acknowledges when the test says
	want := sendSeqs(t, h, f, 3)
	waitSeqs(t, u, f.conv.ID, 3)
	away, owed := awayAndBack(t, h, f, 1)
	want = append(want, owed...)
	away2, after := awayAndBack(t, h, f, 1)

	// The window is full of the first membership's messages all along:
	// the tail of its leave is not queued yet. Now the client reads.
	ackAndWant(t, h, f, u, append(want, after...), append(away, away2...))
}
