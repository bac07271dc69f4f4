package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A member added later to a "joined" group reads a founder's reply to a
// message from before their join with the quote its writer sent: live
// delivery carries the message's body at the reply, and an edit of that
// message after it reaches the late member without its body
// (chat.FloorHidesEdit), so their client keeps that quote. History and
// catch-up gave the quote of the body as it is now, the hidden edit's
// text; they give the quote as sent now. A reply written after the edit
// quotes the edited text (its writer shared it), and once the whole
// history is open the quotes follow the edits, as a founder's do.
func TestALateMembersQuoteOfAMessageFromBeforeTheirJoinIsTheOneItsReplySent(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, founder, late = 1, 2, 9
	secret := mustSend(t, st, g.ID, owner, "before you came")
	mustAdd(t, ctx, st, g.ID, owner, late, "")
	early := mustReply(t, st, g.ID, founder, "re", secret.Seq)
	mustChange(t, st, edit(g.ID, owner, secret.Seq, "edited secret"))
	later := mustReply(t, st, g.ID, founder, "re again", secret.Seq)
	live := map[int64]string{early.Seq: early.ReplyTo.Snippet, later.Seq: later.ReplyTo.Snippet}
	if live[early.Seq] != "before you came" || live[later.Seq] != "edited secret" {
		t.Fatalf("live quotes %v, want the body at each reply", live)
	}
	quotes := func(user int64) (history, catchUp map[int64]string) {
		t.Helper()
		history, catchUp = map[int64]string{}, map[int64]string{}
		for _, m := range mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: user}) {
			if m.ReplyTo != nil {
				history[m.Seq] = m.ReplyTo.Snippet
			}
		}
		for _, m := range sinceOne(t, ctx, sess, user, chat.Range{ConversationID: g.ID, After: early.Seq - 1}) {
			if m.ReplyTo != nil {
				catchUp[m.Seq] = m.ReplyTo.Snippet
			}
		}
		return history, catchUp
	}
	check := func(what string, user int64, want map[int64]string) {
		t.Helper()
		history, catchUp := quotes(user)
		for seq, w := range want {
			if history[seq] != w || catchUp[seq] != w {
				t.Errorf("%s: the reply at seq %d quotes %q in history and %q in catch-up, want %q", what, seq, history[seq], catchUp[seq], w)
			}
		}
	}
	check("late member, history joined", late, live)
	check("founder", founder, map[int64]string{early.Seq: "edited secret", later.Seq: "edited secret"})
	openHistory(t, ctx, st, g.ID, owner)
	check("late member, history all", late, map[int64]string{early.Seq: "edited secret", later.Seq: "edited secret"})
}
