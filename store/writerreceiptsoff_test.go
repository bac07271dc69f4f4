package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
)

// Writing an entry moves the writer's read watermark (their own unread
// count drops), but for a writer whose read receipts are off it tells
// others nothing: "seen by", readSeq (history and inbox) and members'
// lastReadSeq count them as having read nothing, as docs/protocol.md
// "Delivery receipts" says; one with receipts on is counted up to it.
func TestAnEntryByAWriterWithReadReceiptsOffTellsOthersNothingOfTheirReading(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	const alice, bob, carol = 1, 2, 3
	g := mustGroup(t, st, alice, bob, carol)
	if _, err := st.SetSettings(ctx, bob, chat.SettingsUpdate{ReadReceipts: new(false)}); err != nil {
		t.Fatal(err)
	}
	m := mustSend(t, st, g.ID, alice, "lunch?")
	mustSend(t, st, g.ID, carol, "yes")
	mustChange(t, st, react(g.ID, bob, m.Seq, "👍", true))
	last := mustSend(t, st, g.ID, bob, "me too")

	seen, err := st.SeenBy(ctx, g.ID, alice, m.Seq)
	if err != nil || seen.SeenBy != 1 || seen.Members != 2 {
		t.Fatalf("alice's message seen by %+v, %v: want 1 of 2 (carol, whose reply tells it; not bob)", seen, err)
	}
	page, err := st.HistoryPage(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: alice})
	if err != nil || page.ReadSeq >= m.Seq {
		t.Fatalf("alice's readSeq %d, %v: want below %d (bob counts as having read nothing)", page.ReadSeq, err, m.Seq)
	}
	in, err := st.Inbox(ctx, alice, 0, "")
	if err != nil || in.Conversations[0].ReadSeq >= m.Seq {
		t.Fatalf("alice's inbox readSeq: %+v, %v", in, err)
	}
	for _, mm := range mustMembers(t, st, g.ID, alice) {
		if mm.UserID == bob && mm.LastReadSeq != 0 {
			t.Fatalf("alice sees bob's lastReadSeq %d, want 0", mm.LastReadSeq)
		}
	}
	in, err = st.Inbox(ctx, bob, 0, "")
	if err != nil || in.Conversations[0].LastReadSeq != last.Seq || in.Conversations[0].Unread != 0 {
		t.Fatalf("bob's own watermark: %+v, %v: want %d, nothing unread", in.Conversations[0], err, last.Seq)
	}
}
