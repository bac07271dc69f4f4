package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A former member catches up on what they were owed as the group's
// history visibility was at their leave, not as it is now: a group opened
// to "all" before the leave (a title change since not counting) and back
// to "joined" after it still gives them the edit of a message from before
// their join with its body, as it did while they were a member.
func TestAFormerMembersCatchUpReadsTheHistoryVisibilityInForceAtTheirLeave(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, gone = 1, 8
	secret := mustSend(t, st, g.ID, owner, "before you came")
	mustAdd(t, ctx, st, g.ID, owner, gone, "")
	openHistory(t, ctx, st, g.ID, owner)
	title := "renamed"
	if _, err := st.UpdateGroup(ctx, g.ID, owner, chat.GroupUpdate{Title: &title}); err != nil {
		t.Fatal(err)
	}
	ed := mustChange(t, st, edit(g.ID, owner, secret.Seq, "edited secret"))
	mustRemove(t, ctx, st, g.ID, gone, gone, "gone leaves")
	if _, err := st.UpdateGroup(ctx, g.ID, owner, chat.GroupUpdate{HistoryVisible: new(chat.HistoryJoined)}); err != nil {
		t.Fatal(err)
	}
	got := sinceOne(t, ctx, sess, gone, chat.Range{ConversationID: g.ID, After: ed.Entry.Seq - 1, Until: ed.Entry.Seq})
	if len(got) != 1 || got[0].Kind != chat.KindEdit || got[0].Body != "edited secret" || got[0].BodyHidden {
		t.Fatalf("the former member catches up on %+v; want the edit with its body, as the group was at their leave", got)
	}
}
