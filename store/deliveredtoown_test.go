package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
)

// TestDeliveredToCountsAsTheMembersShownDelivered: "seen by"'s
// deliveredTo, asked by any member, counts the members (but the
// message's sender) whose lastDeliveredSeq that member is shown at or
// past the message: a member's read watermark counts as delivered (what
// was read was delivered), but not that of a member whose read receipts
// are off, to anyone else. To that member themself it does, as their own
// lastDeliveredSeq shows it: a reader with receipts off who read a
// message was counted as not having it, while their own member row said
// they had it.
func TestDeliveredToCountsAsTheMembersShownDelivered(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	const alice, bob, quiet = 1, 2, 3
	g := mustGroup(t, st, alice, bob, quiet)
	if _, err := st.SetSettings(ctx, quiet, chat.SettingsUpdate{ReadReceipts: new(false)}); err != nil {
		t.Fatal(err)
	}
	m1 := mustSend(t, st, g.ID, alice, "one")
	m2 := mustSend(t, st, g.ID, alice, "two")
	mustMarkRead(t, ctx, st, g.ID, bob, m1.Seq)
	mustMarkRead(t, ctx, st, g.ID, quiet, m2.Seq)
	for _, viewer := range []int64{alice, bob, quiet} {
		shown := mustMembers(t, st, g.ID, viewer)
		for _, seq := range []int64{m1.Seq, m2.Seq} {
			want := 0
			for _, m := range shown {
				if m.UserID != alice && m.LastDeliveredSeq >= seq {
					want++
				}
			}
			got, err := st.SeenBy(ctx, g.ID, viewer, seq)
			if err != nil {
				t.Fatal(err)
			}
			if got.DeliveredTo != want {
				t.Errorf("viewer %d, message %d: deliveredTo %d, but %d members shown delivered at or past it (%+v)",
					viewer, seq, got.DeliveredTo, want, shown)
			}
		}
	}
}
