package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A member added later to a group whose history is "joined" (the default)
// reads from the entry announcing their join on: not the earlier messages,
// not the body an edit gives an earlier message, and cannot reach earlier
// messages by replying to, forwarding or reacting to them. "all" opens the
// whole history.
func TestAMemberAddedLaterReadsFromTheirJoinWhenHistoryIsJoined(t *testing.T) {
	t.Parallel()
	ctx, st, _, g := groupOf12(t)
	const owner, late = 1, 9
	secret := mustSend(t, st, g.ID, owner, "before you came")
	mustSend(t, st, g.ID, 2, "also before")
	mustAdd(t, ctx, st, g.ID, owner, late, "")
	mustSend(t, st, g.ID, 2, "welcome")
	if _, err := st.Change(ctx, chat.Change{Kind: chat.KindEdit, ConversationID: g.ID, UserID: owner, TargetSeq: secret.Seq,
		ClientMsgID: uuid.NewString(), Body: "edited secret"}); err != nil {
		t.Fatal(err)
	}
	kinds := func(ms []chat.Message) (out []string) {
		for _, m := range ms {
			out = append(out, string(m.Kind)+":"+m.Body)
		}
		return out
	}
	for _, q := range []chat.HistoryQuery{
		{ConversationID: g.ID, UserID: late},
		{ConversationID: g.ID, UserID: late, AfterSeq: 0, Forward: true},
		{ConversationID: g.ID, UserID: late, AfterSeq: 1},
		{ConversationID: g.ID, UserID: late, BeforeSeq: 6},
	} {
		page := mustHistory(t, st, q)
		if len(page) == 0 || page[0].Seq != 3 || page[0].Kind != chat.KindSystem || page[0].System.Action != chat.SystemMemberAdded {
			t.Fatalf("%+v: history %q starts before the join", q, kinds(page))
		}
		for _, m := range page {
			if m.Body == "before you came" || m.Body == "also before" || m.Body == "edited secret" {
				t.Fatalf("%+v: the late member reads %q", q, m.Body)
			}
		}
	}
	in, err := st.Inbox(ctx, late, 0, "")
	if err != nil || in.Conversations[0].LastMessage == nil || in.Conversations[0].LastMessage.Body != "welcome" {
		t.Fatalf("inbox %+v, %v", in, err)
	}
	// Nothing before the join can be reached through a new entry.
	_, err = st.Send(ctx, chat.SendRequest{ConversationID: g.ID, SenderID: late, ClientMsgID: uuid.NewString(), Body: "re", ReplyTo: secret.Seq})
	wantCode(t, "reply to a message from before the join", err, chat.CodeInvalid)
	other := mustGroup(t, st, late)
	_, err = st.Send(ctx, forwardReq(other.ID, late, g.ID, secret.Seq))
	wantCode(t, "forward of a message from before the join", err, chat.CodeNotFound)
	_, err = st.Change(ctx, chat.Change{Kind: chat.KindReaction, ConversationID: g.ID, UserID: late, TargetSeq: secret.Seq,
		ClientMsgID: uuid.NewString(), Emoji: "👀", On: true})
	wantCode(t, "reaction to a message from before the join", err, chat.CodeNotFound)
	// Nor are its receipts theirs to count.
	_, err = st.SeenBy(ctx, g.ID, late, secret.Seq)
	wantCode(t, "who has seen a message from before the join", err, chat.CodeNotFound)
	if _, err := st.SeenBy(ctx, g.ID, 2, secret.Seq); err != nil {
		t.Fatalf("a founder asking who has seen the first message: %v", err)
	}
	// Founders read everything.
	if page, err := st.History(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: 2}); err != nil || page[0].Seq != 1 {
		t.Fatalf("a founder's history %q, %v", kinds(page), err)
	}

	// The owner opens the history.
	openHistory(t, ctx, st, g.ID, owner)
	page, err := st.History(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: late})
	if err != nil || page[0].Seq != 1 || page[0].Body != "edited secret" {
		t.Fatalf("history with historyVisible all: %q, %v", kinds(page), err)
	}
	if _, err := st.Send(ctx, chat.SendRequest{ConversationID: g.ID, SenderID: late, ClientMsgID: uuid.NewString(), Body: "re", ReplyTo: secret.Seq}); err != nil {
		t.Fatalf("reply with historyVisible all: %v", err)
	}
}

// A member who left and came back is not replayed what happened while
// they were away: a persistent session's cursor starts at the rejoin.
func TestARejoiningMembersSessionStartsAtTheRejoin(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	mustSend(t, st, g.ID, 1, "one")
	sess := store.NewSessions(pool)
	if _, err := sess.Open(ctx, "c2", "", 2, true, false, 0); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, g.ID, 2, 2, "user 2 leaves")
	mustSend(t, st, g.ID, 1, "while away")
	mustAdd(t, ctx, st, g.ID, 1, 2, "")
	cs, err := sess.Cursors(ctx, "c2", 2, true)
	if err != nil || len(cs) != 1 || cs[0].Delivered != 3 {
		t.Fatalf("cursors %+v, %v: want delivered 3 (the seq before the rejoin's entry)", cs, err)
	}
}

// Catch-up (SinceMany) gives each user the entries as history shows them:
// an edit made after a late member joined, of a message from before their
// join, reaches them without its new body in a "joined" group, while a
// founder gets the body; "all" gives it to the late member too. A user who
// left (their stream finishing what they were owed) gets it as the group
// was at their leave, their join and the history visibility then: no
// edit's body in a "joined" group, even once the history is opened after
// they left.
func TestCatchUpGivesALateMemberTheEditOfAMessageFromBeforeTheirJoinWithoutItsBody(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, founder, late, gone = 1, 2, 9, 8
	secret := mustSend(t, st, g.ID, owner, "before you came")
	for _, u := range []int64{late, gone} {
		mustAdd(t, ctx, st, g.ID, owner, u, "")
	}
	edit, err := st.Change(ctx, chat.Change{Kind: chat.KindEdit, ConversationID: g.ID, UserID: owner, TargetSeq: secret.Seq,
		ClientMsgID: uuid.NewString(), Body: "edited secret"})
	if err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, g.ID, gone, gone, "gone leaves")
	editBody := func(user int64) string {
		t.Helper()
		r := chat.Range{ConversationID: g.ID, After: edit.Entry.Seq - 1}
		if user == gone {
			r.Until = edit.Entry.Seq // as delivery asks for what a leaver is owed: up to the leave
		}
		got, err := sess.SinceMany(ctx, user, []chat.Range{r}, 1)
		if err != nil || len(got[g.ID]) != 1 || got[g.ID][0].Kind != chat.KindEdit {
			t.Fatalf("catch-up of user %d: %+v, %v; want the edit", user, got, err)
		}
		return got[g.ID][0].Body
	}
	for user, want := range map[int64]string{owner: "edited secret", founder: "edited secret", late: "", gone: ""} {
		if got := editBody(user); got != want {
			t.Errorf("history joined: catch-up gives user %d the edit of seq %d with body %q, want %q", user, secret.Seq, got, want)
		}
	}
	if page, err := st.History(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: late, AfterSeq: edit.Entry.Seq - 1}); err != nil ||
		len(page) == 0 || page[0].Kind != chat.KindEdit || page[0].Body != "" {
		t.Fatalf("the late member's history from the edit: %+v, %v; want the edit without body, as catch-up gives it", page, err)
	}

	openHistory(t, ctx, st, g.ID, owner)
	for user, want := range map[int64]string{late: "edited secret", gone: ""} {
		if got := editBody(user); got != want {
			t.Errorf("history all: catch-up gives user %d the edit with body %q, want %q", user, got, want)
		}
	}
}

// A member added to a group whose history is "joined" learns nothing of
// the messages before their join from their inbox or the conversation:
// no lastMessageAt (the time of a message they may not read), and the
// group sorts by their join, not by that message.
func TestTheInboxOfAMemberAddedLaterHidesWhenTheGroupLastSpokeBeforeTheirJoin(t *testing.T) {
	t.Parallel()
	ctx, st, _, g := groupOf12(t)
	const owner, late = 1, 9
	mustSend(t, st, g.ID, owner, "before you came")
	own := mustGroup(t, st, late)
	mustSend(t, st, own.ID, late, "my own, after that secret, before my join")
	mustAdd(t, ctx, st, g.ID, owner, late, "")
	in, err := st.Inbox(ctx, late, 0, "")
	if err != nil || len(in.Conversations) != 2 {
		t.Fatalf("inbox %+v, %v", in, err)
	}
	first := in.Conversations[0]
	if first.ID != g.ID {
		t.Fatalf("the inbox lists %d first: the group sorts by the time of a message from before the join", first.ID)
	}
	if first.LastMessage != nil || first.LastMessageAt != nil {
		t.Fatalf("the inbox shows the late member lastMessage %+v at %v, from before their join", first.LastMessage, first.LastMessageAt)
	}
	conv, err := st.GetConversation(ctx, g.ID, late)
	if err != nil || conv.LastMessageAt != nil {
		t.Fatalf("the conversation shows the late member lastMessageAt %v (%v), from before their join", conv.LastMessageAt, err)
	}
	// Their first message to read is, and a founder still sees it all.
	welcome := mustSend(t, st, g.ID, 2, "welcome")
	if in, err = st.Inbox(ctx, late, 0, ""); err != nil || in.Conversations[0].LastMessageAt == nil ||
		!in.Conversations[0].LastMessageAt.Equal(welcome.CreatedAt) || in.Conversations[0].LastMessage.Body != "welcome" {
		t.Fatalf("after a message the late member may read, inbox %+v, %v", in, err)
	}
	if conv, err = st.GetConversation(ctx, g.ID, late); err != nil || conv.LastMessageAt == nil || !conv.LastMessageAt.Equal(welcome.CreatedAt) {
		t.Fatalf("after a message the late member may read, conversation %+v, %v", conv, err)
	}
}

// The group a late admin changes comes back to them as GET shows it: no
// lastMessageAt of a message from before their join (until the owner opens
// the whole history).
func TestAGroupChangedByAnAdminAddedLaterShowsThemNoLastMessageAtFromBeforeTheirJoin(t *testing.T) {
	t.Parallel()
	ctx, st, _, g := groupOf12(t)
	const owner, late = 1, 9
	before := mustSend(t, st, g.ID, owner, "before you came")
	mustAdd(t, ctx, st, g.ID, owner, late, chat.RoleAdmin)
	title := "renamed by the late admin"
	conv, err := st.UpdateGroup(ctx, g.ID, late, chat.GroupUpdate{Title: &title})
	if err != nil || conv.LastMessageAt != nil {
		t.Fatalf("the late admin's rename answers lastMessageAt %v (%v), from before their join", conv.LastMessageAt, err)
	}
	all := chat.HistoryAll
	if conv, err = st.UpdateGroup(ctx, g.ID, owner, chat.GroupUpdate{HistoryVisible: &all}); err != nil ||
		conv.LastMessageAt == nil || !conv.LastMessageAt.Equal(before.CreatedAt) {
		t.Fatalf("the owner's change answers lastMessageAt %v (%v), want the last message's", conv.LastMessageAt, err)
	}
	title = "again"
	if conv, err = st.UpdateGroup(ctx, g.ID, late, chat.GroupUpdate{Title: &title}); err != nil ||
		conv.LastMessageAt == nil || !conv.LastMessageAt.Equal(before.CreatedAt) {
		t.Fatalf("with the whole history open, the late admin's rename answers lastMessageAt %v (%v)", conv.LastMessageAt, err)
	}
}

// "Seen by N of M" is about the members a message was sent to: one added
// after it (whose watermarks start at their join, past it) neither saw it
// nor, in a group whose history is "joined", may read it, and is counted
// neither among those who saw it nor among its members.
func TestAMemberAddedAfterAMessageIsNotCountedAsHavingSeenIt(t *testing.T) {
	t.Parallel()
	ctx, st, _, g := groupOf12(t)
	const owner, founder, late, later = 1, 2, 9, 10
	m := mustSend(t, st, g.ID, owner, "who has seen this?")
	mustAdd(t, ctx, st, g.ID, owner, late, "")
	wantSeen(t, ctx, st, g.ID, owner, m.Seq, chat.SeenResult{SeenBy: 0, DeliveredTo: 0, Members: 1}, "nobody but a member added later")
	mustMarkRead(t, ctx, st, g.ID, founder, m.Seq)
	// With the whole history open, a later member reads the message but
	// was not among those it was sent to either.
	openHistory(t, ctx, st, g.ID, owner)
	mustAdd(t, ctx, st, g.ID, owner, later, "")
	wantSeen(t, ctx, st, g.ID, owner, m.Seq, chat.SeenResult{SeenBy: 1, DeliveredTo: 1, Members: 1}, "read by the founder")
	// What came after their join counts them.
	next := mustSend(t, st, g.ID, owner, "and this?")
	mustMarkRead(t, ctx, st, g.ID, late, next.Seq)
	wantSeen(t, ctx, st, g.ID, owner, next.Seq, chat.SeenResult{SeenBy: 1, DeliveredTo: 1, Members: 3}, "a message after both joins")
}

// Catch-up (SinceMany) reads a conversation only as far as the user's
// membership goes: a range without Until gets nothing for a user who is
// not a member, nor for one who joined after its start (they were away in
// between); with Until it ends there, member or not.
func TestCatchUpReadsNothingPastTheUsersMembership(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, member = 1, 2
	before := mustSend(t, st, g.ID, owner, "while a member")
	mustRemove(t, ctx, st, g.ID, owner, member, "owner removes member")
	mustSend(t, st, g.ID, owner, "while away")
	seqs := func(r chat.Range) []int64 {
		t.Helper()
		var out []int64
		for _, m := range sinceOne(t, ctx, sess, member, r) {
			out = append(out, m.Seq)
		}
		return out
	}
	if got := seqs(chat.Range{ConversationID: g.ID, After: before.Seq - 1}); len(got) != 0 {
		t.Fatalf("a removed user's catch-up without Until read seqs %v", got)
	}
	if got := seqs(chat.Range{ConversationID: g.ID, After: before.Seq - 1, Until: before.Seq}); !slices.Equal(got, []int64{before.Seq}) {
		t.Fatalf("a removed user's catch-up up to the leave read seqs %v, want [%d]", got, before.Seq)
	}
	mustAdd(t, ctx, st, g.ID, owner, member, "")
	again := mustSend(t, st, g.ID, owner, "back again")
	if got := seqs(chat.Range{ConversationID: g.ID, After: before.Seq - 1}); len(got) != 0 {
		t.Fatalf("catch-up from before the user's rejoin read seqs %v (they were away in between)", got)
	}
	if got := seqs(chat.Range{ConversationID: g.ID, After: again.Seq - 1}); !slices.Equal(got, []int64{again.Seq}) {
		t.Fatalf("catch-up after the rejoin read seqs %v, want [%d]", got, again.Seq)
	}
}

// A member added later whose read receipts are off counts as having read
// nothing from their join on, but says nothing of the messages from
// before it: history's and the inbox's readSeq, like "seen by N", are
// about the members a message was sent to, so a message every one of them
// read stays read when such a member is added.
func TestAMemberAddedLaterWithReceiptsOffDoesNotUnreadEarlierMessages(t *testing.T) {
	t.Parallel()
	ctx, st, _, g := groupOf12(t)
	const owner, founder, late = 1, 2, 9
	m := mustSend(t, st, g.ID, owner, "read by the founder")
	mustMarkRead(t, ctx, st, g.ID, founder, m.Seq)
	off := false
	if _, err := st.SetSettings(ctx, late, chat.SettingsUpdate{ReadReceipts: &off}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, ctx, st, g.ID, owner, late, "")
	watermarks := func() (historyRead, inboxRead int64) {
		t.Helper()
		page, err := st.HistoryPage(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: owner})
		if err != nil {
			t.Fatal(err)
		}
		inbox, err := st.Inbox(ctx, owner, 10, "")
		if err != nil || len(inbox.Conversations) != 1 {
			t.Fatalf("inbox: %+v %v", inbox, err)
		}
		return page.ReadSeq, inbox.Conversations[0].ReadSeq
	}
	if h, i := watermarks(); h != m.Seq || i != m.Seq {
		t.Errorf("readSeq after a receipts-off member was added: history %d, inbox %d; want %d (the founder read it)", h, i, m.Seq)
	}
	if seen, err := st.SeenBy(ctx, g.ID, owner, m.Seq); err != nil || seen.SeenBy != 1 || seen.Members != 1 {
		t.Errorf("seen by: %+v %v, want 1 of 1", seen, err)
	}
	// What comes after their join is not read by all: they never tell.
	next := mustSend(t, st, g.ID, owner, "after the join")
	mustMarkRead(t, ctx, st, g.ID, founder, next.Seq)
	if h, i := watermarks(); h >= next.Seq || i >= next.Seq || h < m.Seq || i < m.Seq {
		t.Errorf("readSeq after a message the receipts-off member may have read: history %d, inbox %d; want in [%d, %d)", h, i, m.Seq, next.Seq)
	}
}

// A removed member's session still owed entries up to the removal gets
// them as they were then, as a session connected at the time got them
// live: a message edited after the removal comes with the body of its
// last edit before it (and that edit's time), or, first edited after it,
// with its original body and not edited, and a reply quotes what its
// message said then. What was written after the removal, edits included,
// is not the removed member's to read. A member reads the message as it
// is now.
func TestARemovedMembersCatchUpShowsNoEditMadeAfterTheRemoval(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, member = 1, 2
	openHistory(t, ctx, st, g.ID, owner)
	plan := mustSend(t, st, g.ID, owner, "we meet at noon")
	draft := mustSend(t, st, g.ID, owner, "draft")
	before := mustChange(t, st, edit(g.ID, owner, draft.Seq, "draft, reviewed"))
	until := mustReply(t, st, g.ID, owner, "see above", plan.Seq).Seq
	mustRemove(t, ctx, st, g.ID, owner, member, "remove the member")
	mustChange(t, st, edit(g.ID, owner, plan.Seq, "we meet at 3, without them"))
	mustChange(t, st, edit(g.ID, owner, draft.Seq, "final: they are out"))

	got := sinceOne(t, ctx, sess, member, chat.Range{ConversationID: g.ID, After: plan.Seq - 1, Until: until})
	if len(got) != 4 {
		t.Fatalf("the removed member's catch-up: %+v, want the 4 entries up to the removal", got)
	}
	bySeq := indexBySeq(got)
	if m := bySeq[plan.Seq]; m.Body != "we meet at noon" || m.EditedAt != nil {
		t.Errorf("a message first edited after the removal: body %q, editedAt %v; want %q, not edited", m.Body, m.EditedAt, "we meet at noon")
	}
	if m := bySeq[draft.Seq]; m.Body != "draft, reviewed" || m.EditedAt == nil || !m.EditedAt.Equal(before.Entry.CreatedAt) {
		t.Errorf("a message edited before and after the removal: body %q, editedAt %v; want %q at %v",
			m.Body, m.EditedAt, "draft, reviewed", before.Entry.CreatedAt)
	}
	if m := bySeq[until]; m.ReplyTo == nil || m.ReplyTo.Snippet != "we meet at noon" {
		t.Errorf("a reply to a message edited after the removal quotes %+v, want %q", m.ReplyTo, "we meet at noon")
	}

	// The owner, a member, reads them as they are now.
	if ms := sinceOne(t, ctx, sess, owner, chat.Range{ConversationID: g.ID, After: plan.Seq - 1}); len(ms) < 4 || ms[0].Body != "we meet at 3, without them" || ms[1].Body != "final: they are out" ||
		ms[3].ReplyTo == nil || ms[3].ReplyTo.Snippet != "we meet at 3, without them" {
		t.Errorf("a member's catch-up: %+v, want the messages as they are now", ms)
	}
}

// A message its sender first edited, twice, after a member's removal
// reaches the removed member's offline session with the body they had
// read, and so does a reply's quote of it (the first edit after the
// removal kept the body it replaced). A recall later erases that kept
// body with the others: no row of the message table holds the text.
func TestARemovedMemberCatchesUpOnAMessageFirstEditedAfterTheRemovalWithTheBodyTheyRead(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, member = 1, 2
	openHistory(t, ctx, st, g.ID, owner)
	secret := "the vault opens at 0427"
	m := mustSend(t, st, g.ID, owner, secret)
	until := mustReply(t, st, g.ID, owner, "noted", m.Seq).Seq
	mustRemove(t, ctx, st, g.ID, owner, member, "remove the member")
	mustChange(t, st, edit(g.ID, owner, m.Seq, "the vault opens at 0500"))
	mustChange(t, st, edit(g.ID, owner, m.Seq, "the vault opens at 0600"))

	catchUp := func() map[int64]chat.Message {
		t.Helper()
		return indexBySeq(sinceOne(t, ctx, sess, member, chat.Range{ConversationID: g.ID, After: m.Seq - 1, Until: until}))
	}
	got := catchUp()
	if e := got[m.Seq]; e.Body != secret || e.EditedAt != nil {
		t.Errorf("a message first edited after the removal: body %q, editedAt %v; want %q, not edited", e.Body, e.EditedAt, secret)
	}
	if e := got[until]; e.ReplyTo == nil || e.ReplyTo.Snippet != secret {
		t.Errorf("a reply to a message first edited after the removal quotes %+v, want %q", e.ReplyTo, secret)
	}

	mustChange(t, st, change(chat.KindRecall, g.ID, owner, m.Seq))
	if n := queryInt(t, pool, `SELECT count(*) FROM message x WHERE x::text LIKE '%vault opens%'`); n != 0 {
		t.Fatalf("%d rows of message still hold the recalled text", n)
	}
	got = catchUp()
	if e := got[m.Seq]; strings.Contains(e.Body, "vault") {
		t.Errorf("a recalled message replays with body %q", e.Body)
	}
	if e := got[until]; e.ReplyTo != nil && strings.Contains(e.ReplyTo.Snippet, "vault") {
		t.Errorf("a reply to a recalled message quotes %q", e.ReplyTo.Snippet)
	}
}

// openHistory has owner open group conv's whole history to later members.
func openHistory(t *testing.T, ctx context.Context, st *store.Store, conv, owner int64) {
	t.Helper()
	if _, err := st.UpdateGroup(ctx, conv, owner, chat.GroupUpdate{HistoryVisible: new(chat.HistoryAll)}); err != nil {
		t.Fatal(err)
	}
}

// sinceOne is what user's session catches up on of the one range r (at
// most 100 entries).
func sinceOne(t *testing.T, ctx context.Context, sess *store.Sessions, user int64, r chat.Range) []chat.Message {
	t.Helper()
	got, err := sess.SinceMany(ctx, user, []chat.Range{r}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return got[r.ConversationID]
}

func indexBySeq(ms []chat.Message) map[int64]chat.Message {
	out := make(map[int64]chat.Message, len(ms))
	for _, m := range ms {
		out[m.Seq] = m
	}
	return out
}

// A member removed from a group whose history is "joined" catches up on
// the edits they were owed with the floor they had as a member: the body
// of an edit of a message from after their join (a founder's: all of
// them), as they would have got it live, and none of one from before it.
// The floor is not their current membership's: they have none.
func TestARemovedMembersCatchUpInAJoinedGroupShowsTheEditsTheirFloorAllowed(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	const owner, founder, later = 1, 2, 3
	old := mustSend(t, st, g.ID, owner, "before the later member")
	mustAdd(t, ctx, st, g.ID, owner, later, chat.RoleMember)
	m := mustSend(t, st, g.ID, owner, "we meet at noon")
	oldEdit := mustChange(t, st, edit(g.ID, owner, old.Seq, "before, edited"))
	mEdit := mustChange(t, st, edit(g.ID, owner, m.Seq, "we meet at one"))
	until := mEdit.Entry.Seq
	mustRemove(t, ctx, st, g.ID, owner, later, "remove the later member")
	mustRemove(t, ctx, st, g.ID, owner, founder, "remove the founder")

	for _, c := range []struct {
		user           int64
		oldBody, mBody string
	}{
		{founder, "before, edited", "we meet at one"},
		{later, "", "we meet at one"},
	} {
		got := indexBySeq(sinceOne(t, ctx, sess, c.user, chat.Range{ConversationID: g.ID, After: m.Seq, Until: until}))
		if e := got[oldEdit.Entry.Seq]; e.Kind != chat.KindEdit || e.Body != c.oldBody {
			t.Errorf("user %d's catch-up of the edit of #%d: %+v, want body %q", c.user, old.Seq, e, c.oldBody)
		}
		if e := got[mEdit.Entry.Seq]; e.Kind != chat.KindEdit || e.Body != c.mBody {
			t.Errorf("user %d's catch-up of the edit of #%d: %+v, want body %q", c.user, m.Seq, e, c.mBody)
		}
	}
}

// A member removed and added back to a group whose history is "joined"
// catches up on what the first membership owed them with that
// membership's floor, not the later join's, which is past all of it.
func TestAReAddedMembersCatchUpOfTheirEarlierMembershipShowsItsEdits(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	m := mustSend(t, st, g.ID, 1, "we meet at noon")
	e := mustChange(t, st, edit(g.ID, 1, m.Seq, "we meet at one"))
	mustRemove(t, ctx, st, g.ID, 1, 2, "remove the member")
	mustAdd(t, ctx, st, g.ID, 1, 2, chat.RoleMember)
	got := sinceOne(t, ctx, sess, 2, chat.Range{ConversationID: g.ID, After: m.Seq, Until: e.Entry.Seq})
	if len(got) != 1 || got[0].Kind != chat.KindEdit || got[0].Body != "we meet at one" {
		t.Fatalf("the earlier membership's catch-up: %+v, want the edit with its body %q", got, "we meet at one")
	}
}
