package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// TestEventsKeepComingWhileChatdLeavesAJoinEntryUnanswered: the entry of
// the user's own member.added, in a group the catch-up found them gone
// from, brings the group back only once chatd says it starts their
// current membership (conversation.get), and the dispatcher asked again
// until Close: with chatd not answering, the entry never came (nor, when
// the dispatcher waited for the answer, any event of any conversation).
// It asks a bounded number of times, then takes the entry for the start
// of the membership (here it is: the user was added back and chatd
// dropped the member.added event, as it does past an overflowing
// session's queue), and the group is tracked from it.
func TestEventsKeepComingWhileChatdLeavesAJoinEntryUnanswered(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 2*time.Second)
	after := sendN(t, j.a, j.busy, 1, "meanwhile")
	join, busy := int64(0), false
	if !watchEvents(t, j.b, 30*time.Second, func(ev client.Event) bool {
		if j.isJoinEntry(ev) {
			join = ev.Seq
		}
		if ev.Type == client.EventMessageNew && ev.ConversationID == j.busy && ev.Seq == after[0] {
			busy = true
		}
		return busy && join != 0
	}) {
		t.Fatalf("within 30s while chatd left the join entry unanswered: the message %d of another conversation came: %v; the join entry came: %v",
			after[0], busy, join != 0)
	}
	if h, ok := j.b.Positions()[j.g]; !ok || h != join {
		t.Fatalf("the group in Positions: %d %v, want tracked from its join entry %d", h, ok, join)
	}
	j.b.DropReplies(nil)
	more := sendN(t, j.a, j.g, 1, "in the group again")
	messages(t, j.b, j.g, 1, 10*time.Second)
	if h := j.b.Positions()[j.g]; h != more[0] {
		t.Fatalf("the group in Positions at %d, want %d", h, more[0])
	}
}

// TestOtherConversationsEventsComeWhileChatdIsAskedAboutAJoinEntry: while
// chatd is asked whether the user's own member.added entry starts their
// membership of a group (see
// TestEventsKeepComingWhileChatdLeavesAJoinEntryUnanswered), only that
// group's events wait for the answer. Another conversation's messages
// waited too, up to 3 request timeouts of unanswered questions (45s by
// default); they are handed on at once. The group's messages that came
// meanwhile follow the join entry in order once chatd answers.
func TestOtherConversationsEventsComeWhileChatdIsAskedAboutAJoinEntry(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 15*time.Second)
	held := sendN(t, j.a, j.g, 2, "while asked")
	busy := sendN(t, j.a, j.busy, 2, "meanwhile")
	got := 0
	if !watchEvents(t, j.b, 5*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == j.g && ev.Seq > 0 {
			t.Fatalf("entry %d of the group (%s) handed on while chatd was asked about its join entry", ev.Seq, ev.Type)
		}
		if ev.Type == client.EventMessageNew && ev.ConversationID == j.busy && ev.Seq == busy[got] {
			got++
		}
		return got == len(busy)
	}) {
		t.Fatalf("%d/%d messages of another conversation within 5s while chatd was asked about a group's join entry", got, len(busy))
	}

	j.b.DropReplies(nil) // chatd's answer to the next question comes
	var seqs []int64
	if !watchEvents(t, j.b, 30*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != j.g || ev.Seq == 0 {
			return false
		}
		if len(seqs) == 0 && !j.isJoinEntry(ev) {
			t.Fatalf("entry %d of the group (%s) handed on before its join entry", ev.Seq, ev.Type)
		}
		seqs = append(seqs, ev.Seq)
		return ev.Seq >= held[1]
	}) {
		t.Fatalf("entries of the group within 30s of chatd answering: %v, want the join entry, then %v", seqs, held)
	}
	if want := []int64{held[0] - 1, held[0], held[1]}; !slices.Equal(seqs, want) {
		t.Fatalf("entries of the group handed on: %v, want %v (the join entry, then what came while chatd was asked)", seqs, want)
	}
	if h, ok := j.b.Positions()[j.g]; !ok || h != held[1] {
		t.Fatalf("the group in Positions: %d %v, want tracked at %d", h, ok, held[1])
	}
}

// TestTypingInAGroupAskedAboutIsNotHeld: while chatd is asked about a
// group's join entry, the group's entries wait for the answer (see
// TestOtherConversationsEventsComeWhileChatdIsAskedAboutAJoinEntry), but
// someone typing there is handed on at once: typing is of now, and held
// it came after the answer, up to 3 request timeouts later (45s by
// default), showing someone typing long after they stopped.
func TestTypingInAGroupAskedAboutIsNotHeld(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 15*time.Second)
	j.b.InjectEvent(fmt.Appendf(nil, `{"type":"typing","conversationId":%d,"userId":1}`, j.g))
	if !watchEvents(t, j.b, 5*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == j.g && ev.Seq > 0 {
			t.Fatalf("entry %d of the group (%s) handed on while chatd was asked about its join entry", ev.Seq, ev.Type)
		}
		return ev.Type == client.EventTyping && ev.ConversationID == j.g
	}) {
		t.Fatal("user 1 typing in the group was not handed on within 5s while chatd was asked about its join entry")
	}
}

// TestReadAndDeliveryUpdatesInAGroupAskedAboutAreNotHeld: while chatd is
// asked about a group's join entry, the group's entries wait for the
// answer, but the read.updated and delivery.updated of the user's own
// message, whose seq Send returned, are handed on at once, though its
// entry is held: the application has that seq, and held they came
// after the answer, up to 3 request timeouts later (45s by default),
// showing a message unread or undelivered long after it was read or
// delivered. (Receipts naming a held entry the application was not
// told of wait: TestAReceiptOfAnEntryHeldForAJoinQuestionComesAfterIt.)
func TestReadAndDeliveryUpdatesInAGroupAskedAboutAreNotHeld(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 15*time.Second)
	ctx := ctxFor(t, 30*time.Second)
	// User 2's own message: an entry, held; user 1's session
	// acknowledging it moves their delivered watermark, told to its
	// sender by delivery.updated.
	mine, err := j.b.Send(ctx, j.g, "mine, while asked")
	if err != nil {
		t.Fatal(err)
	}
	notEntry := func(ev client.Event) {
		if ev.ConversationID == j.g && isEntryType(ev.Type) {
			t.Fatalf("entry %d of the group (%s) handed on while chatd was asked about its join entry", ev.Seq, ev.Type)
		}
	}
	if !watchEvents(t, j.b, 5*time.Second, func(ev client.Event) bool {
		notEntry(ev)
		return ev.Type == client.EventDeliveryUpdated && ev.ConversationID == j.g && ev.UserID == 1 && ev.Seq == mine
	}) {
		t.Fatalf("user 1's delivery.updated of %d not handed on within 5s while chatd was asked about the group's join entry", mine)
	}
	// User 1 reads it (after their acknowledgement moved the delivered
	// watermark, which a read moves too): read.updated to the members.
	if _, err := j.a.MarkReadNow(ctx, j.g, mine); err != nil {
		t.Fatal(err)
	}
	if !watchEvents(t, j.b, 5*time.Second, func(ev client.Event) bool {
		notEntry(ev)
		return ev.Type == client.EventReadUpdated && ev.ConversationID == j.g && ev.UserID == 1 && ev.Seq == mine
	}) {
		t.Fatalf("user 1's read.updated of %d not handed on within 5s while chatd was asked about the group's join entry", mine)
	}
}

// TestAReceiptOfAnEntryHeldForAJoinQuestionComesAfterIt: while chatd is
// asked about a group's join entry, a read.updated naming a seq at or
// above the join entry's (user 2 reading, on another device, a message
// held with it) waits with the entries and follows the message it
// names, as docs/protocol.md promises; one naming a seq below the join
// entry's, an entry handed on already, goes on at once. The read.updated
// came at once, ahead of the join entry and of the message: an
// application counting unread as last seq minus read seq counted below
// zero, and one ignoring the events of a group it does not know yet
// (its member.added held too) lost the watermark for good, since
// receipts are not replayed.
func TestAReceiptOfAnEntryHeldForAJoinQuestionComesAfterIt(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 15*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	held := sendN(t, j.a, j.g, 1, "while asked")
	join := held[0] - 1 // the join entry, held (TestOtherConversationsEventsComeWhileChatdIsAskedAboutAJoinEntry)
	other := connect(t, testConfig(t, "mqtt://"+j.srv.MQTTAddr(), 2))
	if _, err := other.MarkReadNow(ctx, j.g, held[0]); err != nil {
		t.Fatalf("user 2 reads %d on another device: %v", held[0], err)
	}
	// A watermark of an entry the application has: below the join entry.
	below := join - 1
	j.b.InjectEvent(fmt.Appendf(nil, `{"type":"read.updated","conversationId":%d,"userId":1,"seq":%d}`, j.g, below))
	busy := sendN(t, j.a, j.busy, 1, "after the read")
	sawBelow := false
	if !watchEvents(t, j.b, 10*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == j.g && isEntryType(ev.Type) {
			t.Fatalf("entry %d of the group (%s) handed on while chatd was asked about its join entry", ev.Seq, ev.Type)
		}
		if ev.Type == client.EventReadUpdated && ev.ConversationID == j.g {
			if ev.Seq >= join {
				t.Fatalf("user %d's read.updated of %d handed on before the entry it names: the join entry %d and what follows it are held", ev.UserID, ev.Seq, join)
			}
			sawBelow = sawBelow || ev.Seq == below
		}
		return ev.Type == client.EventMessageNew && ev.ConversationID == j.busy && ev.Seq == busy[0]
	}) {
		t.Fatalf("message %d of another conversation not handed on within 10s while chatd was asked about the group's join entry", busy[0])
	}
	if !sawBelow {
		t.Fatalf("the read.updated of %d, below the join entry %d, not handed on at once while chatd was asked about it", below, join)
	}

	j.b.DropReplies(nil) // chatd's answer to the next question comes
	var got []string
	if !watchEvents(t, j.b, 30*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != j.g || (!isEntryType(ev.Type) && ev.Type != client.EventReadUpdated) {
			return false
		}
		got = append(got, fmt.Sprintf("%s %d", ev.Type, ev.Seq))
		return ev.Type == client.EventReadUpdated && ev.UserID == 2
	}) {
		t.Fatalf("events of the group within 30s of chatd answering: %v, want user 2's read.updated of %d among them", got, held[0])
	}
	want := []string{fmt.Sprintf("system.new %d", join), fmt.Sprintf("message.new %d", held[0]), fmt.Sprintf("read.updated %d", held[0])}
	if !slices.Equal(got, want) {
		t.Fatalf("events of the group handed on: %v, want %v (the join entry, the message, then the receipt that names it)", got, want)
	}
}

// isEntryType reports whether events of typ are entries of a
// conversation's stream.
func isEntryType(typ string) bool {
	switch typ {
	case client.EventMessageNew, client.EventMessageEdited, client.EventMessageRecalled, client.EventReactionUpdated, client.EventSystemNew:
		return true
	}
	return false
}

// TestCloseReturnsPromptlyWhileAskingAboutAJoinEntry: Close ends a
// question about a join entry (see
// TestOtherConversationsEventsComeWhileChatdIsAskedAboutAJoinEntry) that
// would go on for minutes, and returns within seconds: it waits for the
// question's goroutine, which is one of the client's. The entry, still
// held, is not handed on, and the group stays out of Positions.
func TestCloseReturnsPromptlyWhileAskingAboutAJoinEntry(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, time.Minute)
	start := time.Now()
	closeWithin(t, "close client", 5*time.Second, j.b.Close)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v with a question about a join entry under way", d)
	}
	for ev := range j.b.Events() {
		if ev.ConversationID == j.g && ev.Seq > 0 {
			t.Fatalf("entry %d of the group (%s) handed on though chatd never answered about its join entry", ev.Seq, ev.Type)
		}
	}
	if h, ok := j.b.Positions()[j.g]; ok {
		t.Fatalf("the group in Positions at %d though its join entry was not handed on", h)
	}
}

// TestAClientThatStopsWhileAskingAboutAJoinEntrySaysWhy: a client asking
// chatd whether a join entry starts the user's membership (see
// TestEventsKeepComingWhileChatdLeavesAJoinEntryUnanswered) when its
// static token is revoked stops connecting, and every later question
// fails at once: it asked again every 5s, for ever, and the entry never
// came (nor, when the dispatcher waited for the answer, the error event
// "unauthorized"). The entry is taken for the start of the membership
// and handed on, as the error event is.
func TestAClientThatStopsWhileAskingAboutAJoinEntrySaysWhy(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 10*time.Second)
	revokeTokensOf2(t, j.srv)
	join := int64(0)
	var code string
	if !watchEvents(t, j.b, 20*time.Second, func(ev client.Event) bool {
		if j.isJoinEntry(ev) {
			join = ev.Seq
		}
		if ev.Type == client.EventError {
			code = ev.Code
		}
		return code != "" && join != 0
	}) {
		t.Fatalf("within 20s of the revocation: error event %q, join entry handed on: %v (Err: %v)", code, join != 0, j.b.Err())
	}
	if code != "unauthorized" || !errors.Is(j.b.Err(), client.ErrUnauthorized) {
		t.Fatalf("error event code %q, Err %v; want unauthorized", code, j.b.Err())
	}
	if h, ok := j.b.Positions()[j.g]; !ok || h != join {
		t.Fatalf("the group in Positions: %d %v, want tracked from its join entry %d", h, ok, join)
	}
}

// TestAClientThatStopsWhileAskingAboutAJoinEntryHandsOnWhatItHeldFirst:
// a client that stops connecting (its static token revoked) while chatd
// is asked about a group's join entry hands on the entry, taken for the
// start of the membership, and the group's entries held with it before
// its error event, in the order they came: they came before the stop.
// The error event "unauthorized" came first, and the held entries after
// it, once the question ended, as if the stopped client went on
// receiving. Nothing of the group follows the error event.
func TestAClientThatStopsWhileAskingAboutAJoinEntryHandsOnWhatItHeldFirst(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, time.Minute)
	held := sendN(t, j.a, j.g, 2, "while asked")
	busy := sendN(t, j.a, j.busy, 1, "meanwhile")
	// The other conversation's message, sent after the group's, came:
	// so did the group's, held.
	if !watchEvents(t, j.b, 10*time.Second, func(ev client.Event) bool {
		return ev.Type == client.EventMessageNew && ev.ConversationID == j.busy && ev.Seq == busy[0]
	}) {
		t.Fatalf("message %d of another conversation not handed on within 10s while chatd was asked about the group's join entry", busy[0])
	}
	revokeTokensOf2(t, j.srv)
	var seqs []int64
	code := ""
	if !watchEvents(t, j.b, 20*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == j.g && ev.Seq > 0 && isEntryType(ev.Type) {
			seqs = append(seqs, ev.Seq)
		}
		code = ev.Code
		return ev.Type == client.EventError
	}) {
		t.Fatalf("no error event within 20s of the revocation (Err: %v); entries of the group handed on: %v", j.b.Err(), seqs)
	}
	if code != "unauthorized" {
		t.Fatalf("error event code %q, want unauthorized", code)
	}
	if want := []int64{held[0] - 1, held[0], held[1]}; !slices.Equal(seqs, want) {
		t.Fatalf("entries of the group before the error event: %v, want %v (the join entry, then what came while chatd was asked)", seqs, want)
	}
	closeWithin(t, "close client", 10*time.Second, j.b.Close)
	for ev := range j.b.Events() {
		if ev.ConversationID == j.g && ev.Seq > 0 {
			t.Fatalf("%s %d of the group handed on after the error event", ev.Type, ev.Seq)
		}
	}
	if h, ok := j.b.Positions()[j.g]; !ok || h != held[1] {
		t.Fatalf("the group in Positions: %d %v, want tracked at %d", h, ok, held[1])
	}
}

// TestAClientThatStopsWhileFillingAGapSaysWhy: a gap filled through
// history is retried until it is filled, and a client whose static token
// is revoked meanwhile stops connecting: every history call fails at
// once, and the dispatcher retried it every 5s for ever, its error event
// "unauthorized" never handed on. The fill ends as on Close instead: the
// entry after the gap is not handed on and Positions stays before it,
// for the next client to go on from.
func TestAClientThatStopsWhileFillingAGapSaysWhy(t *testing.T) {
	t.Parallel()
	srv, broker := nodeOn(t, pgtest.NewDB(t))
	a := connect(t, testConfig(t, broker, 1))
	conv := direct(t, a, 2)
	b := connect(t, testConfig(t, broker, 2))
	sendN(t, a, conv, 1, "first")
	messages(t, b, conv, 1, 10*time.Second)

	dropMessages(b, 2, 2)
	asked := make(chan struct{}, 1)
	b.DropReplies(func([]byte) bool {
		select {
		case asked <- struct{}{}:
		default:
		}
		return true
	})
	sendN(t, a, conv, 2, "more") // 2 lost on the way: a gap before 3
	testkit.Receive(t, asked, 15*time.Second, "the gap before 3 was not filled through history within 15s")
	revokeTokensOf2(t, srv)
	var code string
	if !watchEvents(t, b, 20*time.Second, func(ev client.Event) bool {
		if ev.Type == client.EventMessageNew && ev.ConversationID == conv {
			t.Fatalf("message %d handed on though the gap before 3 was never filled", ev.Seq)
		}
		code = ev.Code
		return ev.Type == client.EventError
	}) {
		t.Fatalf("no error event within 20s of the revocation (Err: %v)", b.Err())
	}
	if code != "unauthorized" {
		t.Fatalf("error event code %q, want unauthorized", code)
	}
	if h := b.Positions()[conv]; h != 1 {
		t.Fatalf("the conversation in Positions at %d, want 1: nothing after the gap was handed on", h)
	}
}

// joinAsked is a group g that user 2's client b was removed from while
// offline and added back to by user 1 (a) on chatd srv, whose
// member.added event b lost (its system entry came): b is asking chatd
// whether that entry starts the user's membership, and chatd's replies
// to b are dropped. busy is the direct conversation of users 1 and 2.
type joinAsked struct {
	srv     *server.Server
	px      *proxy // user 2's connection to srv
	a, b    *client.Client
	g, busy int64
}

// isJoinEntry reports whether ev is the system entry of user 2's
// member.added in the group.
func (j joinAsked) isJoinEntry(ev client.Event) bool {
	return ev.Type == client.EventSystemNew && ev.ConversationID == j.g &&
		ev.Action == "member.added" && ev.UserID == 2
}

// askedAboutAJoinEntry sets up joinAsked for a persistent session b
// whose requests time out after requestTimeout.
func askedAboutAJoinEntry(t *testing.T, requestTimeout time.Duration) joinAsked {
	t.Helper()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), nil), nil)
	a := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	busy := direct(t, a, 2)
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	cfg.SessionDir = t.TempDir()
	cfg.RequestTimeout = requestTimeout
	b := connect(t, cfg)
	ctx := ctxFor(t, 60*time.Second)

	g, err := a.CreateGroup(ctx, "back", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 2, "before")
	messages(t, b, g.ID, 2, 10*time.Second)
	removeWhileOffline(t, ctx, a, b, px, g.ID)

	// chatd drops the live member.added of a session whose queue
	// overflowed, never the entry (TestAGroupJoinedWhileTheSessionOverflowsIsTracked).
	b.DropEvents(func(p []byte) bool {
		var ev client.Event
		return json.Unmarshal(p, &ev) == nil && ev.Type == client.EventMemberAdded && ev.ConversationID == g.ID
	})
	asked := make(chan struct{}, 1)
	b.DropReplies(func(p []byte) bool {
		if bytes.Contains(p, []byte(`"joinSeq"`)) && !bytes.Contains(p, []byte(`"conversations"`)) {
			select {
			case asked <- struct{}{}:
			default:
			}
		}
		return true
	})
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, asked, 15*time.Second, "user 2's client did not ask chatd about its join entry within 15s")
	return joinAsked{srv: srv, px: px, a: a, b: b, g: g.ID, busy: busy}
}

// revokeTokensOf2 revokes every token of user 2 through a client of
// their own on srv: chatd closes their connections and refuses the
// static tokens from then on, so their clients stop connecting.
func revokeTokensOf2(t *testing.T, srv *server.Server) {
	t.Helper()
	c := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 2))
	if _, err := c.RevokeTokens(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("revoke the tokens of user 2: %v", err)
	}
}
