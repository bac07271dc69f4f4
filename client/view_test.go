package client_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// logOf is a stream of two conversations' entries: messages, replies,
// edits, a recall that erases an edited message, and reactions set and
// removed by the viewer (user 2) and others.
func logOf() []client.Event {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := func(conv, seq, sender int64, body string) client.Event {
		return client.Event{Type: client.EventMessageNew, ConversationID: conv, Seq: seq, SenderID: sender, Body: body, CreatedAt: at}
	}
	edit := func(conv, seq, target int64, body string) client.Event {
		return client.Event{Type: client.EventMessageEdited, ConversationID: conv, Seq: seq, TargetSeq: target, SenderID: 1, Body: body, EditedAt: &at}
	}
	react := func(conv, seq, target, user int64, emoji string, on bool, count int) client.Event {
		return client.Event{Type: client.EventReactionUpdated, ConversationID: conv, Seq: seq, TargetSeq: target, UserID: user, Emoji: emoji, On: on, Count: count}
	}
	reply := msg(7, 4, 3, "agreed")
	reply.ReplyTo = &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch at 12?"}
	return []client.Event{
		msg(7, 1, 1, "lunch at 12?"),
		msg(7, 2, 2, "sure"),
		react(7, 3, 1, 2, "👍", true, 1),
		reply,
		edit(7, 5, 1, "lunch at 1?"),
		react(7, 6, 1, 3, "👍", true, 2),
		react(7, 7, 1, 2, "👍", false, 1),
		react(7, 8, 2, 3, "🎉", true, 1),
		{Type: client.EventMessageRecalled, ConversationID: 7, Seq: 9, TargetSeq: 2, ActorID: 2},
		react(7, 10, 1, 2, "😂", true, 1),
		msg(8, 1, 3, "other room"),
		edit(8, 2, 1, "other room!"),
		react(8, 3, 1, 2, "✅", true, 1),
		{Type: client.EventTyping, ConversationID: 8, UserID: 3}, // not an entry: ignored
	}
}

func TestViewBuiltFromAShuffledThenOrderedLogIsTheConversationsCurrentState(t *testing.T) {
	t.Parallel()
	log := logOf()
	for round := range 20 {
		shuffled := slices.Clone(log)
		rng := rand.New(rand.NewPCG(uint64(round), 9))
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		// Events hands them on per conversation in seq order.
		ordered := slices.Clone(shuffled)
		slices.SortStableFunc(ordered, func(a, b client.Event) int {
			if a.ConversationID != b.ConversationID {
				return int(a.ConversationID - b.ConversationID)
			}
			return int(a.Seq - b.Seq)
		})
		v := client.NewView(2)
		for _, ev := range ordered {
			v.Apply(ev)
		}
		// Applying everything again (a replay) changes nothing.
		for _, ev := range ordered {
			v.Apply(ev)
		}
		got := v.Messages(7)
		if len(got) != 3 {
			t.Fatalf("round %d: %d messages in conversation 7, want 3", round, len(got))
		}
		first, second, third := got[0], got[1], got[2]
		if first.Body != "lunch at 1?" || first.EditedAt == nil || first.Recalled {
			t.Fatalf("edited message %+v", first)
		}
		wantReactions := []client.Reaction{{Emoji: "👍", Count: 1, Me: false}, {Emoji: "😂", Count: 1, Me: true}}
		if !reflect.DeepEqual(first.Reactions, wantReactions) {
			t.Fatalf("reactions %+v, want %+v", first.Reactions, wantReactions)
		}
		if !second.Recalled || second.Body != "" || len(second.Reactions) != 0 {
			t.Fatalf("recalled message %+v", second)
		}
		if third.ReplyTo == nil || third.ReplyTo.Snippet != "lunch at 1?" {
			t.Fatalf("the reply's quote %+v does not follow the edit", third.ReplyTo)
		}
		other := v.Messages(8)
		if len(other) != 1 || other[0].Body != "other room!" || len(other[0].Reactions) != 1 || !other[0].Reactions[0].Me {
			t.Fatalf("conversation 8: %+v", other)
		}
		if v.Position(7) != 10 || v.Position(8) != 3 {
			t.Fatalf("positions %d, %d", v.Position(7), v.Position(8))
		}
	}
}

// The view built from history pages (messages as they are now, then every
// change as an entry) equals the one built from the live events.
func TestViewFromHistoryEqualsTheViewFromEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	live := client.NewView(2)
	for _, ev := range logOf() {
		if ev.ConversationID == 7 {
			live.Apply(ev)
		}
	}
	hist := client.NewView(2)
	hist.ApplyHistory([]client.Message{
		{ConversationID: 7, Seq: 1, Kind: client.KindMessage, SenderID: 1, Body: "lunch at 1?", CreatedAt: at, EditedAt: &at,
			Reactions: []client.Reaction{{Emoji: "👍", Count: 1}, {Emoji: "😂", Count: 1, Me: true}}},
		{ConversationID: 7, Seq: 2, Kind: client.KindMessage, SenderID: 2, CreatedAt: at, Recalled: true},
		{ConversationID: 7, Seq: 3, Kind: client.KindReaction, TargetSeq: 1, UserID: 2, Emoji: "👍", On: true, Count: 1},
		{ConversationID: 7, Seq: 4, Kind: client.KindMessage, SenderID: 3, Body: "agreed", CreatedAt: at,
			ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch at 1?"}},
		{ConversationID: 7, Seq: 5, Kind: client.KindEdit, TargetSeq: 1, SenderID: 1, Body: "lunch at 1?", CreatedAt: at},
		{ConversationID: 7, Seq: 6, Kind: client.KindReaction, TargetSeq: 1, UserID: 3, Emoji: "👍", On: true, Count: 2},
		{ConversationID: 7, Seq: 7, Kind: client.KindReaction, TargetSeq: 1, UserID: 2, Emoji: "👍", On: false, Count: 1},
		{ConversationID: 7, Seq: 8, Kind: client.KindReaction, TargetSeq: 2, UserID: 3, Emoji: "🎉", On: true, Count: 1},
		{ConversationID: 7, Seq: 9, Kind: client.KindRecall, TargetSeq: 2, ActorID: 2, CreatedAt: at},
		{ConversationID: 7, Seq: 10, Kind: client.KindReaction, TargetSeq: 1, UserID: 2, Emoji: "😂", On: true, Count: 1},
	})
	strip := func(ms []client.MessageView) []client.MessageView {
		for i := range ms {
			ms[i].CreatedAt, ms[i].EditedAt = time.Time{}, nil
			slices.SortFunc(ms[i].Reactions, func(a, b client.Reaction) int {
				if a.Emoji < b.Emoji {
					return -1
				}
				return 1
			})
		}
		return ms
	}
	if a, b := strip(live.Messages(7)), strip(hist.Messages(7)); !reflect.DeepEqual(a, b) {
		t.Fatalf("from events:\n%+v\nfrom history:\n%+v", a, b)
	}
}

// TestViewAddsOlderPagesWithTheChangesThatArrivedMeanwhile: an app opens a
// conversation at its newest page and scrolls back; the older page's
// messages join the view as history shows them, entries of that page that
// are older than the view's position do not undo what the view shows,
// and a change that arrived live while the older page was on its way
// (read before the change committed) still shows once the page is
// applied.
func TestViewAddsOlderPagesWithTheChangesThatArrivedMeanwhile(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v := client.NewView(2)
	// The newest page: seqs 4 and 5, a reply to seq 1.
	v.ApplyHistory([]client.Message{
		{ConversationID: 7, Seq: 4, Kind: client.KindMessage, SenderID: 3, Body: "agreed", CreatedAt: at,
			ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch at 12?"}},
		{ConversationID: 7, Seq: 5, Kind: client.KindMessage, SenderID: 1, Body: "see you", CreatedAt: at},
	})
	// Live, while the older page is on its way: seq 1 edited, seq 2
	// reacted to, by the viewer.
	v.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 6, TargetSeq: 1, SenderID: 1, Body: "lunch at 1?", EditedAt: &at})
	v.Apply(client.Event{Type: client.EventReactionUpdated, ConversationID: 7, Seq: 7, TargetSeq: 2, UserID: 2, Emoji: "👍", On: true, Count: 2})
	// The older page, read before seqs 6 and 7: seq 3 is an edit of seq 2
	// that its message's state already shows.
	v.ApplyHistory([]client.Message{
		{ConversationID: 7, Seq: 1, Kind: client.KindMessage, SenderID: 1, Body: "lunch at 12?", CreatedAt: at},
		{ConversationID: 7, Seq: 2, Kind: client.KindMessage, SenderID: 2, Body: "sure!", CreatedAt: at, EditedAt: &at,
			Reactions: []client.Reaction{{Emoji: "👍", Count: 1}}},
		{ConversationID: 7, Seq: 3, Kind: client.KindEdit, TargetSeq: 2, SenderID: 2, Body: "sure", CreatedAt: at},
	})
	got := v.Messages(7)
	if len(got) != 4 {
		t.Fatalf("%d messages, want 4 (seqs 1, 2, 4, 5): %+v", len(got), got)
	}
	if got[0].Seq != 1 || got[0].Body != "lunch at 1?" || got[0].EditedAt == nil {
		t.Errorf("seq 1: %+v, want the edit that arrived while its page was read", got[0])
	}
	if got[1].Seq != 2 || got[1].Body != "sure!" || !reflect.DeepEqual(got[1].Reactions, []client.Reaction{{Emoji: "👍", Count: 2, Me: true}}) {
		t.Errorf("seq 2: %+v, want its current body and the viewer's reaction", got[1])
	}
	if got[2].ReplyTo == nil || got[2].ReplyTo.Snippet != "lunch at 1?" {
		t.Errorf("the reply's quote: %+v, want the edited text", got[2].ReplyTo)
	}
	if v.Position(7) != 7 {
		t.Errorf("position %d, want 7: an older page does not move it", v.Position(7))
	}
	// The same page again changes nothing.
	v.ApplyHistory([]client.Message{{ConversationID: 7, Seq: 1, Kind: client.KindMessage, SenderID: 1, Body: "lunch at 12?", CreatedAt: at}})
	if m := v.Messages(7)[0]; m.Body != "lunch at 1?" {
		t.Errorf("seq 1 after its page came again: %q", m.Body)
	}
}

// A view that holds a reply but not the message it quotes (an app that
// opened the conversation at its newest page, the quoted message older)
// shows the quote as that message is now: recalled once a live recall of
// it arrives (not the recalled text), the new text once it is edited, as
// history shows the reply to a client that reads it afterwards.
func TestAReplysQuoteFollowsALiveRecallOrEditOfAMessageTheViewDoesNotHold(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	page := []client.Message{
		{ConversationID: 7, Seq: 4, Kind: client.KindMessage, SenderID: 3, Body: "agreed", CreatedAt: at,
			ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch at 12?"}},
		{ConversationID: 7, Seq: 5, Kind: client.KindMessage, SenderID: 2, Body: "noted", CreatedAt: at,
			ReplyTo: &client.ReplyRef{Seq: 2, SenderID: 1, Snippet: "the door code is 4711"}},
	}
	v := client.NewView(2)
	v.ApplyHistory(page)
	v.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 6, TargetSeq: 1, SenderID: 1, Body: "lunch at 1?", EditedAt: &at})
	v.Apply(client.Event{Type: client.EventMessageRecalled, ConversationID: 7, Seq: 7, TargetSeq: 2, ActorID: 1})
	got := v.Messages(7)
	if len(got) != 2 {
		t.Fatalf("%d messages, want the two replies: %+v", len(got), got)
	}
	if r := got[0].ReplyTo; r == nil || r.Snippet != "lunch at 1?" || r.Recalled {
		t.Errorf("the quote of edited seq 1: %+v, want %q", r, "lunch at 1?")
	}
	if r := got[1].ReplyTo; r == nil || r.Snippet != "" || !r.Recalled {
		t.Errorf("the quote of recalled seq 2: %+v, want recalled without its text", r)
	}
}

// System entries (joins, leaves, renames) target no message: a view that
// kept them among the changes waiting for older messages lost those
// changes once a busy group's entries filled the list, and the older
// page then showed a message without its edit.
func TestSystemEntriesDoNotPushOutChangesWaitingForTheirMessage(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v := client.NewView(2)
	v.ApplyHistory([]client.Message{{ConversationID: 7, Seq: 5, Kind: client.KindMessage, SenderID: 1, Body: "newest", CreatedAt: at}})
	v.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 6, TargetSeq: 1, SenderID: 1, Body: "lunch at 1?", EditedAt: &at})
	for seq := int64(7); seq < 7+2000; seq++ {
		v.Apply(client.Event{Type: client.EventSystemNew, ConversationID: 7, Seq: seq, Action: "member.added", UserID: seq, CreatedAt: at})
	}
	v.ApplyHistory([]client.Message{{ConversationID: 7, Seq: 1, Kind: client.KindMessage, SenderID: 1, Body: "lunch at 12?", CreatedAt: at}})
	if m := v.Messages(7)[0]; m.Seq != 1 || m.Body != "lunch at 1?" {
		t.Fatalf("seq 1 from its older page: %+v, want the edit that arrived before 2,000 system entries", m)
	}
	if v.Position(7) != 7+2000-1 {
		t.Fatalf("position %d, want %d: system entries are entries of the stream", v.Position(7), 7+2000-1)
	}
}

// A view that holds replies to messages it does not hold: an edit that
// cleared the text of one (a photo's caption) empties the quote, live and
// from history, as history shows the reply afterwards, while an edit
// whose body chatd hides from the viewer (bodyHidden: a message from
// before their join to a group whose history is "joined") tells nothing
// of the text and leaves the quote. History entries are decoded from the
// JSON chatd sends.
func TestAClearedCaptionEmptiesTheQuoteOfAMessageNotHeldAndAHiddenEditLeavesIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	replies := func() []client.Message {
		return []client.Message{
			{ConversationID: 7, Seq: 4, Kind: client.KindMessage, SenderID: 3, Body: "nice", CreatedAt: at,
				ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "the view"}},
			{ConversationID: 7, Seq: 5, Kind: client.KindMessage, SenderID: 3, Body: "agreed", CreatedAt: at,
				ReplyTo: &client.ReplyRef{Seq: 2, SenderID: 1, Snippet: "old words"}},
		}
	}
	check := func(how string, v *client.View) {
		t.Helper()
		got := v.Messages(7)
		if len(got) != 2 {
			t.Fatalf("%s: %d messages, want the two replies: %+v", how, len(got), got)
		}
		if r := got[0].ReplyTo; r == nil || r.Snippet != "" || r.Recalled {
			t.Errorf("%s: the quote of seq 1, whose caption was cleared: %+v, want an empty snippet", how, r)
		}
		if r := got[1].ReplyTo; r == nil || r.Snippet != "old words" || r.Recalled {
			t.Errorf("%s: the quote of seq 2, edited out of the viewer's sight: %+v, want %q kept", how, r, "old words")
		}
	}

	live := client.NewView(3)
	live.ApplyHistory(replies())
	live.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 6, TargetSeq: 1, SenderID: 1, Body: "", EditedAt: &at})
	live.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 7, TargetSeq: 2, SenderID: 1, Body: "", BodyHidden: true, EditedAt: &at})
	check("live", live)

	var page struct{ Messages []client.Message }
	if err := json.Unmarshal([]byte(`{"messages":[
		{"conversationId":7,"seq":6,"kind":"edit","targetSeq":1,"senderId":1,"clientMsgId":"a","body":"","createdAt":"2030-01-02T03:04:05Z"},
		{"conversationId":7,"seq":7,"kind":"edit","targetSeq":2,"senderId":1,"clientMsgId":"b","body":"","bodyHidden":true,"createdAt":"2030-01-02T03:04:05Z"}]}`), &page); err != nil {
		t.Fatal(err)
	}
	hist := client.NewView(3)
	hist.ApplyHistory(replies())
	hist.ApplyHistory(page.Messages)
	check("history", hist)
}

// A view that holds a message from an earlier membership (the user was
// removed from a group whose history is "joined" and added again): an
// edit of it reaches them with its body hidden (bodyHidden), which tells
// nothing of the text, so the message keeps the text they read instead of
// showing as cleared; a cleared caption still clears it.
func TestAHiddenEditLeavesAHeldMessageAsItWasAndAClearedCaptionClearsIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v := client.NewView(2)
	v.ApplyHistory([]client.Message{
		{ConversationID: 7, Seq: 1, Kind: client.KindMessage, SenderID: 1, Body: "the view", CreatedAt: at},
		{ConversationID: 7, Seq: 2, Kind: client.KindMessage, SenderID: 1, Body: "the lake", CreatedAt: at},
		{ConversationID: 7, Seq: 3, Kind: client.KindMessage, SenderID: 3, Body: "nice", CreatedAt: at,
			ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "the view"}},
	})
	v.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 9, TargetSeq: 1, SenderID: 1, Body: "", BodyHidden: true, EditedAt: &at})
	v.Apply(client.Event{Type: client.EventMessageEdited, ConversationID: 7, Seq: 10, TargetSeq: 2, SenderID: 1, Body: "", EditedAt: &at})
	got := v.Messages(7)
	if got[0].Body != "the view" || got[0].EditedAt != nil {
		t.Errorf("seq 1 after an edit hidden from the viewer: body %q, edited at %v; want it as it was", got[0].Body, got[0].EditedAt)
	}
	if r := got[2].ReplyTo; r == nil || r.Snippet != "the view" {
		t.Errorf("the quote of seq 1 after an edit hidden from the viewer: %+v, want %q kept", r, "the view")
	}
	if got[1].Body != "" || got[1].EditedAt == nil {
		t.Errorf("seq 2 after its caption was cleared: body %q, edited at %v; want it empty and edited", got[1].Body, got[1].EditedAt)
	}
}
