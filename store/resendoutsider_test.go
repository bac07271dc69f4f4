package store_test

import (
	"testing"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

// TestAResendByARemovedMemberTellsNothingOfTheConversationSince: a resend
// of one's own stored change is answered before membership is judged (it
// committed while the sender was a member), but the answer must not carry
// what the conversation became after the removal: a reply's snippet of a
// message edited since, or how many carry a reaction's emoji now.
func TestAResendByARemovedMemberTellsNothingOfTheConversationSince(t *testing.T) {
	ctx, st, _, g := groupOf12(t)
	mustSend(t, st, g.ID, 1, "before")
	reply := chat.Change{Kind: chat.KindMessage, ConversationID: g.ID, UserID: 2, ClientMsgID: uuid.NewString(), Body: "re", ReplyTo: 1}
	if _, err := st.Change(ctx, reply); err != nil {
		t.Fatal(err)
	}
	reaction := react(g.ID, 2, 1, "👍", true)
	if _, err := st.Change(ctx, reaction); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, g.ID, 1, 2, "user 2")
	mustChange(t, st, edit(g.ID, 1, 1, "said after user 2 left"))
	mustChange(t, st, react(g.ID, 1, 1, "👍", true))

	res, err := st.Change(ctx, reply)
	if err != nil || !res.Duplicate || res.Entry.Seq != 2 {
		t.Fatalf("resend of the reply: %+v %v, want the duplicate seq 2", res, err)
	}
	if r := res.Entry.ReplyTo; r == nil || r.Seq != 1 || r.Snippet != "" || r.Recalled {
		t.Fatalf("resend of the reply by a non-member answers replyTo %+v: it shows the conversation after the removal", r)
	}
	res, err = st.Change(ctx, reaction)
	if err != nil || !res.Duplicate || res.Entry.Seq != 3 {
		t.Fatalf("resend of the reaction: %+v %v, want the duplicate seq 3", res, err)
	}
	if res.Entry.Count != 0 {
		t.Fatalf("resend of the reaction by a non-member answers count %d: the reactions after the removal", res.Entry.Count)
	}

	// A member's resend still has them.
	mustSend(t, st, g.ID, 1, "x")
	own := chat.Change{Kind: chat.KindMessage, ConversationID: g.ID, UserID: 1, ClientMsgID: uuid.NewString(), Body: "re", ReplyTo: 1}
	for range 2 {
		if res, err = st.Change(ctx, own); err != nil || res.Entry.ReplyTo == nil || res.Entry.ReplyTo.Snippet != "said after user 2 left" {
			t.Fatalf("member's reply: %+v %v", res.Entry.ReplyTo, err)
		}
	}
}

// TestAResendAfterARemoveAndReAddTellsNothingFromBeforeTheNewJoin: in a
// group whose history is "joined", a member removed and added back
// reaches nothing from before their new join. A resend of a reply they
// made in their first membership is still their change (a duplicate),
// but its answer must not carry the current text of the message it
// replies to, which their new membership cannot read.
func TestAResendAfterARemoveAndReAddTellsNothingFromBeforeTheNewJoin(t *testing.T) {
	ctx, st, _, g := groupOf12(t)
	if g.HistoryVisible != chat.HistoryJoined {
		t.Fatalf("history %q, want joined", g.HistoryVisible)
	}
	mustSend(t, st, g.ID, 1, "before")
	reply := chat.Change{Kind: chat.KindMessage, ConversationID: g.ID, UserID: 2, ClientMsgID: uuid.NewString(), Body: "re", ReplyTo: 1}
	if _, err := st.Change(ctx, reply); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, g.ID, 1, 2, "user 2")
	mustAdd(t, ctx, st, g.ID, 1, 2, chat.RoleMember)
	mustChange(t, st, edit(g.ID, 1, 1, "not for the new membership"))
	res, err := st.Change(ctx, reply)
	if err != nil || !res.Duplicate || res.Entry.Seq != 2 {
		t.Fatalf("resend of the reply: %+v %v, want the duplicate seq 2", res, err)
	}
	if r := res.Entry.ReplyTo; r == nil || r.Seq != 1 || r.Snippet != "" {
		t.Fatalf("resend of the reply after a re-add answers replyTo %+v: text from before the new join", r)
	}
}
