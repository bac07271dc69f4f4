package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

func change(kind chat.EntryKind, conv, user, target int64) chat.Change {
	return chat.Change{Kind: kind, ConversationID: conv, UserID: user, ClientMsgID: uuid.NewString(), TargetSeq: target}
}

func edit(conv, user, target int64, body string) chat.Change {
	c := change(chat.KindEdit, conv, user, target)
	c.Body = body
	return c
}

func react(conv, user, target int64, emoji string, on bool) chat.Change {
	c := change(chat.KindReaction, conv, user, target)
	c.Emoji, c.On = emoji, on
	return c
}

func mustChange(t *testing.T, st *store.Store, c chat.Change) chat.ChangeResult {
	t.Helper()
	res, err := st.Change(testCtx(t), c)
	if err != nil {
		t.Fatalf("%s of %d by %d: %v", c.Kind, c.TargetSeq, c.UserID, err)
	}
	return res
}

func lastSeq(t *testing.T, pool *pgxpool.Pool, conv int64) int64 {
	t.Helper()
	return queryInt(t, pool, `SELECT COALESCE((SELECT last_seq FROM conversation WHERE id = $1), 0)`, conv)
}

// refused runs c and wants it refused with code, with nothing stored: the
// conversation's last_seq and its entries and reactions stay as they were.
func refused(t *testing.T, st *store.Store, pool *pgxpool.Pool, what string, c chat.Change, code chat.Code) {
	t.Helper()
	before := lastSeq(t, pool, c.ConversationID)
	rows := queryInt(t, pool, `SELECT count(*) FROM message`)
	reactions := queryInt(t, pool, `SELECT count(*) FROM reaction`)
	_, err := st.Change(testCtx(t), c)
	wantCode(t, what, err, code)
	if after := lastSeq(t, pool, c.ConversationID); after != before {
		t.Fatalf("%s: refused, yet last_seq moved from %d to %d", what, before, after)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message`); n != rows {
		t.Fatalf("%s: refused, yet %d entries became %d", what, rows, n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM reaction`); n != reactions {
		t.Fatalf("%s: refused, yet %d reactions became %d", what, reactions, n)
	}
}

func TestEveryLifecycleRuleRefusesWithItsCodeAndStoresNothing(t *testing.T) {
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2, 3)
	other := mustGroup(t, st, 4, 5)
	m1 := mustSend(t, st, g.ID, 1, "first")
	m2 := mustSend(t, st, g.ID, 2, "second")
	o1 := mustSend(t, st, other.ID, 4, "elsewhere")
	mustChange(t, st, react(g.ID, 3, m1.Seq, "👍", true))
	rc := mustChange(t, st, change(chat.KindRecall, g.ID, 2, m2.Seq))
	reactionSeq := lastSeq(t, pool, g.ID) - 1 // the reaction before the recall

	reply := func(to int64) chat.Change {
		return chat.SendRequest{ConversationID: g.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "re", ReplyTo: to}.Change()
	}
	forward := func(conv, seq int64) chat.Change {
		return forwardReq(g.ID, 1, conv, seq).Change()
	}
	refused(t, st, pool, "reply to a seq past the end", reply(99), chat.CodeInvalid)
	refused(t, st, pool, "reply to a reaction entry", reply(reactionSeq), chat.CodeInvalid)
	refused(t, st, pool, "forward from a conversation the sender is not in", forward(other.ID, o1.Seq), chat.CodeForbidden)
	refused(t, st, pool, "forward of a recalled message", forward(g.ID, m2.Seq), chat.CodeNotFound)
	refused(t, st, pool, "forward of a missing message", forward(g.ID, 99), chat.CodeNotFound)
	refused(t, st, pool, "edit by another member", edit(g.ID, 2, m1.Seq, "mine now"), chat.CodeForbidden)
	refused(t, st, pool, "edit of a recalled message", edit(g.ID, 2, m2.Seq, "back"), chat.CodeGone)
	refused(t, st, pool, "edit of a reaction entry", edit(g.ID, 3, reactionSeq, "x"), chat.CodeNotFound)
	refused(t, st, pool, "edit of a missing message", edit(g.ID, 1, 99, "x"), chat.CodeNotFound)
	refused(t, st, pool, "edit with an empty body", edit(g.ID, 1, m1.Seq, ""), chat.CodeInvalid)
	refused(t, st, pool, "edit with an oversize body", edit(g.ID, 1, m1.Seq, strings.Repeat("x", chat.DefaultMaxBodyBytes+1)), chat.CodeTooLarge)
	refused(t, st, pool, "recall by a plain member", change(chat.KindRecall, g.ID, 3, m1.Seq), chat.CodeForbidden)
	refused(t, st, pool, "reaction on a recalled message", react(g.ID, 3, m2.Seq, "👍", true), chat.CodeGone)
	refused(t, st, pool, "reaction with whitespace", react(g.ID, 3, m1.Seq, "a b", true), chat.CodeInvalid)
	refused(t, st, pool, "reaction over 32 bytes", react(g.ID, 3, m1.Seq, strings.Repeat("x", 33), true), chat.CodeInvalid)
	refused(t, st, pool, "reaction by a non-member", react(g.ID, 9, m1.Seq, "👍", true), chat.CodeNotMember)
	refused(t, st, pool, "edit in an unknown conversation", edit(999999, 1, 1, "x"), chat.CodeNotFound)
	for i := range chat.MaxReactionsPerUser - 1 {
		mustChange(t, st, react(g.ID, 3, m1.Seq, fmt.Sprint("e", i), true))
	}
	refused(t, st, pool, "a 21st distinct reaction", react(g.ID, 3, m1.Seq, "one-too-many", true), chat.CodeConflict)

	// Asking for what already is writes nothing and is answered.
	before := lastSeq(t, pool, g.ID)
	if res := mustChange(t, st, react(g.ID, 3, m1.Seq, "👍", true)); !res.Unchanged || res.Entry.Seq != 0 || res.Entry.Count != 1 {
		t.Fatalf("setting a set reaction: %+v", res)
	}
	if res := mustChange(t, st, react(g.ID, 2, m1.Seq, "👎", false)); !res.Unchanged || res.Entry.Seq != 0 {
		t.Fatalf("removing an absent reaction: %+v", res)
	}
	if res := mustChange(t, st, change(chat.KindRecall, g.ID, 1, m2.Seq)); !res.Unchanged || res.Entry.Seq != rc.Entry.Seq {
		t.Fatalf("recalling twice (by the owner): %+v, want the first recall's seq %d", res, rc.Entry.Seq)
	}
	if after := lastSeq(t, pool, g.ID); after != before {
		t.Fatalf("unchanged answers moved last_seq from %d to %d", before, after)
	}
}

func TestEditAndRecallWindowsBindTheSenderNotTheGroupsAdmins(t *testing.T) {
	lim := chat.DefaultLimits()
	lim.EditWindow, lim.RecallWindow = time.Hour, time.Hour
	st, pool := newStoreWithLimits(t, lim)
	g := mustGroup(t, st, 1, 2, 3)
	if _, _, err := st.AddMember(testCtx(t), g.ID, 1, 4, chat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	old := mustSend(t, st, g.ID, 2, "old")
	fresh := mustSend(t, st, g.ID, 2, "fresh")
	if _, err := pool.Exec(testCtx(t), `UPDATE message SET created_at = created_at - interval '2 hours' WHERE conversation_id = $1 AND seq = $2`, g.ID, old.Seq); err != nil {
		t.Fatal(err)
	}
	refused(t, st, pool, "edit past the window", edit(g.ID, 2, old.Seq, "too late"), chat.CodeForbidden)
	refused(t, st, pool, "recall past the window by the sender", change(chat.KindRecall, g.ID, 2, old.Seq), chat.CodeForbidden)
	mustChange(t, st, edit(g.ID, 2, fresh.Seq, "in time"))
	mustChange(t, st, change(chat.KindRecall, g.ID, 4, old.Seq)) // an admin, any time
	mustChange(t, st, change(chat.KindRecall, g.ID, 1, fresh.Seq))
	// No limit at all.
	unlimited := store.New(pool, chat.Limits{EditWindow: chat.NoLimit, RecallWindow: chat.NoLimit})
	t.Cleanup(func() { _ = unlimited.Close(context.Background()) })
	ancient := mustSend(t, unlimited, g.ID, 3, "ancient")
	if _, err := pool.Exec(testCtx(t), `UPDATE message SET created_at = created_at - interval '3000 hours' WHERE conversation_id = $1 AND seq = $2`, g.ID, ancient.Seq); err != nil {
		t.Fatal(err)
	}
	mustChange(t, unlimited, edit(g.ID, 3, ancient.Seq, "still mine"))
	mustChange(t, unlimited, change(chat.KindRecall, g.ID, 3, ancient.Seq))
}

// store.New's zero limits are the chat defaults, the windows too: a store
// made with chat.Limits{} lets a sender edit and recall what they just
// sent (a zero window would refuse every edit and recall as too late).
func TestAStoreWithZeroLimitsHasTheDefaultEditAndRecallWindows(t *testing.T) {
	_, pool := newStore(t)
	st := store.New(pool, chat.Limits{})
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	g := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 2, "just sent")
	mustChange(t, st, edit(g.ID, 2, m.Seq, "just edited"))
	mustChange(t, st, change(chat.KindRecall, g.ID, 2, m.Seq))
	old := mustSend(t, st, g.ID, 2, "old")
	if _, err := pool.Exec(testCtx(t), `UPDATE message SET created_at = created_at - interval '49 hours' WHERE conversation_id = $1 AND seq = $2`, g.ID, old.Seq); err != nil {
		t.Fatal(err)
	}
	refused(t, st, pool, "edit past the default window", edit(g.ID, 2, old.Seq, "too late"), chat.CodeForbidden)
}

func TestARecalledBodyIsGoneFromEveryTableAndEveryReader(t *testing.T) {
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	secret := "the launch code is 0000"
	m := mustSend(t, st, g.ID, 1, secret)
	mustChange(t, st, edit(g.ID, 1, m.Seq, secret+" (corrected)"))
	mustChange(t, st, react(g.ID, 2, m.Seq, "😮", true))
	reply := mustSend(t, st, g.ID, 2, "what?") // a reply shows the snippet
	if _, err := st.Send(testCtx(t), chat.SendRequest{ConversationID: g.ID, SenderID: 2, ClientMsgID: uuid.NewString(), Body: "quoting", ReplyTo: m.Seq}); err != nil {
		t.Fatal(err)
	}
	mustChange(t, st, change(chat.KindRecall, g.ID, 1, m.Seq))
	_ = reply

	// Every column: an edit entry also keeps the body it replaced.
	if n := queryInt(t, pool, `SELECT count(*) FROM message m WHERE m::text LIKE '%launch code%'`); n != 0 {
		t.Fatalf("%d rows of message still hold the recalled text", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM outbox WHERE payload::text LIKE '%launch code%'`); n != 0 {
		t.Fatalf("%d outbox payloads hold the recalled text", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM reaction WHERE conversation_id = $1 AND seq = $2`, g.ID, m.Seq); n != 0 {
		t.Fatalf("%d reactions left on the recalled message", n)
	}
	page, err := st.HistoryPage(testCtx(t), chat.HistoryQuery{ConversationID: g.ID, UserID: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Messages {
		if strings.Contains(e.Body, "launch code") || (e.ReplyTo != nil && strings.Contains(e.ReplyTo.Snippet, "launch code")) {
			t.Fatalf("history entry %d still shows the recalled text: %+v", e.Seq, e)
		}
		if e.Seq == m.Seq && (!e.Recalled || e.Body != "" || len(e.Reactions) != 0) {
			t.Fatalf("the recalled message reads %+v", e)
		}
		if e.ReplyTo != nil && e.ReplyTo.Seq == m.Seq && !e.ReplyTo.Recalled {
			t.Fatalf("a reply to the recalled message does not say so: %+v", e.ReplyTo)
		}
	}
	// The outbox rows written before the recall are relayed as the entries
	// are now.
	for _, ev := range outboxEvents(t, pool, g.ID, "") {
		if (ev.Body != nil && strings.Contains(*ev.Body, "launch code")) || (ev.ReplyTo != nil && strings.Contains(ev.ReplyTo.Snippet, "launch code")) {
			t.Fatalf("outbox event %s %d carries the recalled text", ev.Type, ev.Seq)
		}
	}
	// And no forward of it can be made.
	_, err = st.Send(testCtx(t), forwardReq(g.ID, 2, g.ID, m.Seq))
	wantCode(t, "forward of the recalled message", err, chat.CodeNotFound)
}

func TestUnreadCountsAndInboxOrderFollowMessagesOnly(t *testing.T) {
	st, _ := newStore(t)
	a := mustGroup(t, st, 1, 2)
	b := mustGroup(t, st, 1, 2)
	ma := mustSend(t, st, a.ID, 1, "a1")
	mustSend(t, st, a.ID, 1, "a2")
	mb := mustSend(t, st, b.ID, 1, "b1") // b is now the newest conversation
	inbox := func() map[int64]chat.InboxEntry {
		t.Helper()
		page, err := st.Inbox(testCtx(t), 2, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if page.Conversations[0].ID != b.ID {
			t.Fatalf("inbox order %d first, want %d (changes of messages must not move a conversation up)", page.Conversations[0].ID, b.ID)
		}
		out := map[int64]chat.InboxEntry{}
		for _, e := range page.Conversations {
			out[e.ID] = e
		}
		return out
	}
	if got := inbox(); got[a.ID].Unread != 2 || got[b.ID].Unread != 1 {
		t.Fatalf("unread %d/%d, want 2/1", got[a.ID].Unread, got[b.ID].Unread)
	}
	mustChange(t, st, edit(a.ID, 1, ma.Seq, "a1, fixed"))
	mustChange(t, st, react(a.ID, 1, ma.Seq, "✅", true))
	mustChange(t, st, change(chat.KindRecall, a.ID, 1, ma.Seq))
	got := inbox()
	if got[a.ID].Unread != 2 || got[a.ID].LastSeq != 5 {
		t.Fatalf("after an edit, a reaction and a recall: unread %d (want 2), last_seq %d (want 5)", got[a.ID].Unread, got[a.ID].LastSeq)
	}
	if lm := got[a.ID].LastMessage; lm == nil || lm.Seq != 2 || lm.Body != "a2" {
		t.Fatalf("last message %+v, want seq 2 (the newest message, not a change)", lm)
	}
	// A read watermark may point at a change: unread counts messages after it.
	if _, err := st.MarkRead(testCtx(t), a.ID, 2, 4); err != nil {
		t.Fatal(err)
	}
	if got := inbox(); got[a.ID].Unread != 0 {
		t.Fatalf("read up to the reaction (seq 4): unread %d, want 0", got[a.ID].Unread)
	}
	if _, err := st.MarkRead(testCtx(t), b.ID, 2, mb.Seq); err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, a.ID, 1, "a3")
	if got := st; got == nil {
		t.Fatal("unreachable")
	}
	page, err := st.Inbox(testCtx(t), 2, 10, "")
	if err != nil || page.Conversations[0].ID != a.ID || page.Conversations[0].Unread != 1 {
		t.Fatalf("a new message moves its conversation up and counts: %+v %v", page.Conversations, err)
	}
}

func TestHistoryShowsEachMessageAsItIsNowAndEveryChangeAsAnEntry(t *testing.T) {
	st, _ := newStore(t)
	g := mustGroup(t, st, 1, 2, 3)
	other := mustGroup(t, st, 2, 1)
	src := mustSend(t, st, other.ID, 2, "worth forwarding")
	m := mustSend(t, st, g.ID, 1, "helo")
	ed := mustChange(t, st, edit(g.ID, 1, m.Seq, "hello"))
	mustChange(t, st, react(g.ID, 2, m.Seq, "👍", true))
	mustChange(t, st, react(g.ID, 3, m.Seq, "👍", true))
	mustChange(t, st, react(g.ID, 3, m.Seq, "🎉", true))
	mustChange(t, st, react(g.ID, 3, m.Seq, "🎉", false))
	re, err := st.Send(testCtx(t), chat.SendRequest{ConversationID: g.ID, SenderID: 2, ClientMsgID: uuid.NewString(), Body: "hi!", ReplyTo: m.Seq})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := st.Send(testCtx(t), forwardReq(g.ID, 1, other.ID, src.Seq))
	if err != nil {
		t.Fatal(err)
	}
	if fw.Message.Body != "worth forwarding" || fw.Message.ForwardedFrom == nil || fw.Message.ForwardedFrom.SenderID != 2 {
		t.Fatalf("forward %+v", fw.Message)
	}
	page, err := st.HistoryPage(testCtx(t), chat.HistoryQuery{ConversationID: g.ID, UserID: 3})
	if err != nil {
		t.Fatal(err)
	}
	kinds := ""
	for _, e := range page.Messages {
		kinds += string(e.Kind)[:1]
	}
	if kinds != "mer"+"rrr"+"mm" {
		t.Fatalf("entry kinds %q, want message, edit, four reactions, two messages", kinds)
	}
	msg := page.Messages[0]
	if msg.Body != "hello" || msg.EditedAt == nil || !msg.EditedAt.Equal(ed.Entry.CreatedAt) {
		t.Fatalf("the edited message reads %+v", msg)
	}
	if len(msg.Reactions) != 1 || msg.Reactions[0] != (chat.ReactionCount{Emoji: "👍", Count: 2, Me: true}) {
		t.Fatalf("reactions as user 3 sees them: %+v", msg.Reactions)
	}
	if e := page.Messages[1]; e.Kind != chat.KindEdit || e.TargetSeq != m.Seq || e.Body != "hello" || e.SenderID != 1 {
		t.Fatalf("edit entry %+v", e)
	}
	if e := page.Messages[5]; e.Kind != chat.KindReaction || e.Emoji != "🎉" || e.On || e.Count != 0 || e.SenderID != 3 {
		t.Fatalf("the removal entry %+v", e)
	}
	r := page.Messages[6]
	if r.Seq != re.Message.Seq || r.ReplyTo == nil || *r.ReplyTo != (chat.ReplyRef{Seq: m.Seq, SenderID: 1, Snippet: "hello"}) {
		t.Fatalf("reply %+v (replyTo %+v)", r, r.ReplyTo)
	}
	f := page.Messages[7]
	if f.Body != "worth forwarding" || f.ForwardedFrom == nil || *f.ForwardedFrom != (chat.ForwardRef{ConversationID: other.ID, Seq: src.Seq, SenderID: 2}) {
		t.Fatalf("forward reads %+v", f)
	}
}

func TestConcurrentResendsOfOneChangeCommitItOnce(t *testing.T) {
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 1, "target")
	for _, c := range []chat.Change{
		edit(g.ID, 1, m.Seq, "edited once"),
		react(g.ID, 2, m.Seq, "🔥", true),
		react(g.ID, 2, m.Seq, "🔥", false),
		change(chat.KindRecall, g.ID, 1, m.Seq),
	} {
		before := lastSeq(t, pool, g.ID)
		results := make([]chat.ChangeResult, 8)
		errs := concurrently(len(results), func(i int) error {
			var err error
			results[i], err = st.Change(context.Background(), c)
			return err
		})
		seq, dups := int64(0), 0
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("%s resend %d: %v", c.Kind, i, errs[i])
			}
			if seq == 0 {
				seq = res.Entry.Seq
			}
			if res.Entry.Seq != seq {
				t.Fatalf("%s: resends answered seqs %d and %d", c.Kind, seq, res.Entry.Seq)
			}
			if res.Duplicate {
				dups++
			}
		}
		if after := lastSeq(t, pool, g.ID); after != before+1 || dups != len(results)-1 {
			t.Fatalf("%s: 8 concurrent resends moved last_seq %d -> %d with %d duplicates", c.Kind, before, after, dups)
		}
	}
}

func TestAReactionsClientMsgIDReusedForAnotherEmojiOrOnIsAConflict(t *testing.T) {
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 1, "target")
	first := react(g.ID, 2, m.Seq, "👍", true)
	done := mustChange(t, st, first)

	otherEmoji := first
	otherEmoji.Emoji = "👎"
	refused(t, st, pool, "the same clientMsgId for another emoji", otherEmoji, chat.CodeConflict)
	removal := first
	removal.On = false
	refused(t, st, pool, "the same clientMsgId for the removal", removal, chat.CodeConflict)
	if n := queryInt(t, pool, `SELECT count(*) FROM reaction WHERE conversation_id = $1 AND seq = $2 AND user_id = 2`, g.ID, m.Seq); n != 1 {
		t.Fatalf("user 2 carries %d reactions, want the first one only", n)
	}

	// The very same change is still answered as a duplicate.
	res := mustChange(t, st, first)
	if !res.Duplicate || res.Entry.Seq != done.Entry.Seq || res.Entry.Emoji != "👍" || !res.Entry.On || res.Entry.Count != 1 {
		t.Fatalf("the resend: %+v, want a duplicate of seq %d (👍, on, count 1)", res, done.Entry.Seq)
	}
}

func TestRecallingARecalledMessageAnswersTheFirstRecallWhole(t *testing.T) {
	st, _ := newStore(t)
	g := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 2, "soon gone")
	first := mustChange(t, st, change(chat.KindRecall, g.ID, 2, m.Seq))
	again := change(chat.KindRecall, g.ID, 1, m.Seq) // the owner, with a clientMsgId of its own
	res := mustChange(t, st, again)
	want := first.Entry
	if !res.Unchanged || res.Entry.Seq != want.Seq || res.Entry.ClientMsgID != want.ClientMsgID ||
		res.Entry.SenderID != want.SenderID || !res.Entry.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("recalling again answered %+v, want unchanged and the first recall %+v", res.Entry, want)
	}
}

// A forward is a copy of another message, shown as that message's sender's
// ("forwardedFrom"): its forwarder may not put words in that sender's
// mouth by editing it. The edit is refused (forbidden) and stores
// nothing; the forward keeps the source's body. Recalling it stays the
// forwarder's right.
func TestAForwardedMessageCannotBeEditedByItsForwarder(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	h := mustGroup(t, st, 1, 3)
	src := mustSend(t, st, g.ID, 2, "I owe you 10 euros")
	fwd, err := st.Send(ctx, forwardReq(h.ID, 1, g.ID, src.Seq))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, st, pool, "edit of a forward by its forwarder", edit(h.ID, 1, fwd.Message.Seq, "I owe you 1000 euros"), chat.CodeForbidden)
	page := mustHistory(t, st, chat.HistoryQuery{ConversationID: h.ID, UserID: 3})
	for _, m := range page {
		if m.Seq == fwd.Message.Seq && (m.Body != "I owe you 10 euros" || m.ForwardedFrom == nil || m.ForwardedFrom.SenderID != 2 || m.EditedAt != nil) {
			t.Fatalf("the forward reads %+v, want user 2's body unedited", m)
		}
	}
	mustChange(t, st, change(chat.KindRecall, h.ID, 1, fwd.Message.Seq))
}

// A resent reaction is answered with the stored entry, as its first
// answer was: the count after that change, not after the reactions others
// set since (history's reaction entry says the same).
func TestAResentReactionAnswersTheCountItsFirstAnswerGave(t *testing.T) {
	st, _ := newStore(t)
	g := mustGroup(t, st, 1, 2, 3)
	m := mustSend(t, st, g.ID, 1, "target")
	first := react(g.ID, 2, m.Seq, "👍", true)
	done := mustChange(t, st, first)
	mustChange(t, st, react(g.ID, 3, m.Seq, "👍", true))
	res := mustChange(t, st, first)
	if !res.Duplicate || res.Entry.Seq != done.Entry.Seq || res.Entry.Count != done.Entry.Count {
		t.Fatalf("the resend answered %+v, want a duplicate of seq %d with count %d, as the first answer", res.Entry, done.Entry.Seq, done.Entry.Count)
	}
}

// A resend answers the message as it is now (send_test.go: as recalled
// once recalled). Edited since, its body is the edit's, so the answer
// says edited with the edit's time, as history does: not the first
// answer's unedited message with another text.
func TestAResentMessageEditedSinceIsAnsweredAsEdited(t *testing.T) {
	ctx, st, _, g := groupOf12(t)
	req := sendReq(g.ID, 2, "first words")
	first, err := st.Send(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ed := mustChange(t, st, edit(g.ID, 2, first.Message.Seq, "second words"))
	res, err := st.Send(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Message
	if !res.Duplicate || m.Seq != first.Message.Seq || m.Body != "second words" || m.EditedAt == nil || !m.EditedAt.Equal(ed.Entry.CreatedAt) {
		t.Fatalf("the resend answered %+v (editedAt %v), want a duplicate of seq %d reading %q, edited at %v",
			m, m.EditedAt, first.Message.Seq, "second words", ed.Entry.CreatedAt)
	}
	page := mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 1})
	if h := page[0]; h.Body != m.Body || h.EditedAt == nil || !h.EditedAt.Equal(*m.EditedAt) {
		t.Fatalf("history reads %+v, the resend's answer %+v", h, m)
	}
}
