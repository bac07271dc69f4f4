package delivery_test

import (
	"context"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// A join carries the group's last_seq before it (k) and commits with the
// entry that announces it (k+1): a read watermark that moved on another
// node with the group at k, before the join, and that the relay brings
// only after it, is not the new member's, though its place is the join's
// seq. They get member.added, at that seq, and what follows it.
func TestAMemberAddedGetsNoReadReceiptCommittedJustBeforeTheJoin(t *testing.T) {
	st, f, rec, conv, h := nodeOfRecord(t)
	stays := attachUser(t, h, f, "stays", 2, false, true, true)
	added := attachUser(t, h, f, "added", 4, false, true, true)
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) { // warms the member index
		h.Deliver(ev)
	}
	seq := waitSeqs(t, stays, conv.ID, 1)[0]
	addAfterAReadElsewhere(t, st, rec, h, conv.ID, 4, added, seq)
	waitSeqs(t, added, conv.ID, 1)
	if n := events(added, chat.EventReadUpdated, conv.ID); n != 0 {
		t.Fatalf("the new member got %d read.updated committed before their join", n)
	}
}

// joinedAt routes the join rec holds to c's user and waits until they
// heard of it: member.added at seq.
func joinedAt(t *testing.T, h *delivery.Hub, rec *recorder, c *fakeConn, conv, seq int64) {
	t.Helper()
	join := rec.take()
	if join[0].Type != chat.EventMemberAdded || join[0].Seq != seq {
		t.Fatalf("the join published %s at %d first, want member.added at %d", join[0].Type, join[0].Seq, seq)
	}
	for _, ev := range join {
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the new member to get member.added", func() bool {
		return events(c, chat.EventMemberAdded, conv) == 1
	})
}

// The same for a member added back while their session still delivers
// what the removal left them owed: a read watermark that moved with the
// group at the re-add's seq, before it, is from while they were away.
func TestAMemberAddedBackWhileOwedTheOldTailGetsNoReadReceiptCommittedJustBeforeTheJoin(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, h := nodeOfRecord(t)
	back := attachUser(t, h, f, "back", 3, false, false, true) // acknowledges when told
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) {
		h.Deliver(ev)
	}
	waitSeqs(t, back, conv.ID, 1)
	owed := back.packets()[0].PacketID // unacknowledged: the removal leaves it owed
	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	for _, ev := range rec.take() {
		h.Deliver(ev)
	}
	away := sendSeqsAs(t, st, rec, conv.ID, 1, 1)[0].Seq // routed to no one: user 3 is away
	addAfterAReadElsewhere(t, st, rec, h, conv.ID, 3, back, away)
	h.Acked("back", back, owed)
	testkit.WaitFor(t, 5*time.Second, "the entry after the re-add", func() bool {
		seqs := back.seqs(conv.ID)
		return seqs[len(seqs)-1] == away+2 // the re-add's entry, then the message
	})
	if n := events(back, chat.EventReadUpdated, conv.ID); n != 0 {
		t.Fatalf("the member added back got %d read.updated committed before their re-add", n)
	}
}

// A member removed on another node and added back here: the re-add
// reaches their session before the removal, which the relay brings late
// (or, older than the join the member index applied, not at all). A join
// past the one the session's stream follows says a leave came between
// them: the session asks PostgreSQL, and the entries after the re-add
// reach the member.
func TestAMemberAddedBackHereBeforeTheRemovalElsewhereIsRelayedGetsWhatFollowsTheJoin(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "persistent"}[persistent], func(t *testing.T) {
			ctx := context.Background()
			st, f, rec, conv, h := nodeOfRecord(t)
			back := attachUser(t, h, f, "back", 3, persistent, true, true)
			for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) {
				h.Deliver(ev)
			}
			waitSeqs(t, back, conv.ID, 1)
			if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil { // elsewhere
				t.Fatal(err)
			}
			removal := rec.take()
			if _, _, err := st.AddMember(ctx, conv.ID, 1, 3, chat.RoleMember); err != nil { // here
				t.Fatal(err)
			}
			joinedAt(t, h, rec, back, conv.ID, removal[1].Seq)
			for _, ev := range append(sendSeqsAs(t, st, rec, conv.ID, 1, 1), removal...) { // then the removal, relayed late
				h.Deliver(ev)
			}
			waitEntry(t, back, conv.ID, removal[1].Seq+1) // the re-add's
			if got, want := waitSeqs(t, back, conv.ID, 2), []int64{1, removal[1].Seq + 2}; !slices.Equal(got, want) {
				t.Fatalf("messages %v, want %v", got, want)
			}
			if _, ok := back.entry(conv.ID, removal[1].Seq); ok {
				t.Fatal("the member got the entry that announced their removal")
			}
		})
	}
}

// addAfterAReadElsewhere commits user 2's read of conv up to seq, held
// back as another node's relay would, then adds user to conv here (their
// session conn hears the join, at seq), and routes the read, late, and an
// entry after it.
func addAfterAReadElsewhere(t *testing.T, st *store.Store, rec *recorder, h *delivery.Hub, conv, user int64, conn *fakeConn, seq int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.MarkRead(ctx, conv, 2, seq); err != nil {
		t.Fatal(err)
	}
	read := rec.take()
	if _, _, err := st.AddMember(ctx, conv, 1, user, chat.RoleMember); err != nil {
		t.Fatal(err)
	}
	joinedAt(t, h, rec, conn, conv, seq)
	for _, ev := range append(read, sendSeqsAs(t, st, rec, conv, 1, 1)...) {
		h.Deliver(ev)
	}
}
