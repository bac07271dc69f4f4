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
	want := sendSeqs(t, h, f, 3)
	waitSeqs(t, u, f.conv.ID, 3)
	removeAndTell(t, h, f)
	away := sendSeqs(t, h, f, 1)
	join(t, h, f, 2)
	want = append(want, sendSeqs(t, h, f, 1)...)
	removeAndTell(t, h, f)
	away = append(away, sendSeqs(t, h, f, 1)...)
	join(t, h, f, 2)
	after := sendSeqs(t, h, f, 1)
	want = append(want, after...)

	// The window is full of the first membership's messages all along:
	// the tail of its leave is not queued yet. Now the client reads.
	acked := map[uint16]bool{}
	eventually(t, 10*time.Second, func() bool {
		for _, p := range u.packets() {
			if p.QoS > 0 && !acked[p.PacketID] {
				acked[p.PacketID] = true
				h.Acked("phone", u, p.PacketID)
			}
		}
		return slices.Contains(u.seqs(f.conv.ID), after[0])
	}, "the message after the second re-add never reached the connected session: got %v, want %v", u.seqs(f.conv.ID), want)
	never(t, 300*time.Millisecond, func() bool { return len(u.seqs(f.conv.ID)) > len(want) },
		"more than %v: %v", want, u.seqs(f.conv.ID))
	if got := u.seqs(f.conv.ID); !slices.Equal(got, want) {
		t.Fatalf("got %v, want each membership's messages in order %v (not %v, sent while away)", got, want, away)
	}
}
