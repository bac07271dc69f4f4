package delivery_test

import (
	"slices"
	"testing"
	"time"

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
	owed := f.send(t, 3)
	publishEach(h, owed)
	waitSeqs(t, u, f.conv.ID, 3)

	removeAndTell(t, h, f)
	away := sendAs(t, f, f.conv.ID, 1)
	h.Publish(away)
	join(t, h, f, 2)
	between := sendAs(t, f, f.conv.ID, 1)
	h.Publish(between)
	removeAndTell(t, h, f)
	awayAgain := sendAs(t, f, f.conv.ID, 1)
	h.Publish(awayAgain)
	join(t, h, f, 2)
	after := sendAs(t, f, f.conv.ID, 1)
	h.Publish(after)

	// The window is full of the first membership's messages all along:
	// the tail of its leave is not queued yet. Now the client reads.
	acked := map[uint16]bool{}
	want := []int64{owed[0].Seq, owed[1].Seq, owed[2].Seq, between.Seq, after.Seq}
	eventually(t, 10*time.Second, func() bool {
		for _, p := range u.packets() {
			if p.QoS > 0 && !acked[p.PacketID] {
				acked[p.PacketID] = true
				h.Acked("phone", u, p.PacketID)
			}
		}
		return slices.Contains(u.seqs(f.conv.ID), after.Seq)
	}, "the message after the second re-add never reached the connected session: got %v, want %v", u.seqs(f.conv.ID), want)
	never(t, 300*time.Millisecond, func() bool { return len(u.seqs(f.conv.ID)) > len(want) },
		"more than %v: %v", want, u.seqs(f.conv.ID))
	if got := u.seqs(f.conv.ID); !slices.Equal(got, want) {
		t.Fatalf("got %v, want each membership's messages in order %v (not %d and %d, sent while away)", got, want, away.Seq, awayAgain.Seq)
	}
}
