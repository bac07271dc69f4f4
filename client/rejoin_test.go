package client_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// TestARedeliveryAfterTheUserWasRemovedIsNotHandedOnAgain: user 2 got a
// group's messages and then member.removed; chatd then delivers those
// messages again (a QoS 1 redelivery after a reconnect, or a replay from a
// cursor a crash left behind). Events hands on each (conversation, seq)
// once: leaving the group must not make the client forget what it
// already handed on.
func TestARedeliveryAfterTheUserWasRemovedIsNotHandedOnAgain(t *testing.T) {
	t.Parallel()
	_, broker, a, _ := sender(t)
	b := connect(t, testConfig(t, broker, 2))
	ctx := ctxFor(t, 30*time.Second)
	g, err := a.CreateGroup(ctx, "leaving", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 2, "m") // seqs 1, 2
	got := messages(t, b, g.ID, 2, 10*time.Second)
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
		return ev.Type == client.EventMemberRemoved && ev.ConversationID == g.ID && ev.UserID == 2
	}) {
		t.Fatal("no member.removed for user 2 within 10s")
	}
	for _, ev := range got {
		dup, _ := json.Marshal(ev)
		b.InjectEvent(dup) // as a redelivery would
	}
	// The dispatcher hands events on in order: once this one is out,
	// the duplicates before it were dropped or handed on.
	b.InjectEvent([]byte(`{"type":"typing","conversationId":1,"userId":1}`))
	if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
		if ev.Type == client.EventMessageNew && ev.ConversationID == g.ID {
			t.Fatalf("message seq %d of the group handed on again after the user left", ev.Seq)
		}
		return ev.Type == client.EventTyping
	}) {
		t.Fatal("the typing event after the duplicates did not come within 10s")
	}
	if d := b.Stats().Duplicates; d != 2 {
		t.Errorf("Duplicates = %d, want 2", d)
	}
}

// TestAConversationLeftWhileOfflineIsDroppedFromPositions: member.removed
// is not replayed, so a client removed while offline (or started with
// Positions of a run before the removal) learns it from the inbox it
// reads on reconnecting. Positions must then drop the conversation
// rather than keep it, and hand it to the next run, for ever.
func TestAConversationLeftWhileOfflineIsDroppedFromPositions(t *testing.T) {
	t.Parallel()
	srv, broker, a, _ := sender(t)
	g, _, before := removedWhileOffline(t, srv, a, "left offline")

	// The next run, given the positions of the run before the removal.
	again := testConfig(t, broker, 2)
	again.Positions = before
	c := connect(t, again)
	testkit.WaitFor(t, 15*time.Second, "the group to leave the next run's positions", func() bool {
		_, ok := c.Positions()[g.ID]
		return !ok
	})
}

// TestAResendOfAMessageCommittedBeforeTheSenderWasRemovedGetsItsSeq:
// user 2's message commits, its PUBACK is lost with the connection, and
// user 2 is removed from the group before the client re-publishes it.
// The message is stored: chatd must answer the resend (same clientMsgId,
// same sender) with its seq, as for any resend, not refuse it as from a
// non-member, which Send would report as a final failure of a message
// everyone else has.
func TestAResendOfAMessageCommittedBeforeTheSenderWasRemovedGetsItsSeq(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv, broker := nodeOn(t, url)
	a := connect(t, testConfig(t, broker, 1))
	ctx := ctxFor(t, 30*time.Second)
	g, err := a.CreateGroup(ctx, "removed mid-send", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, srv.MQTTAddr())
	b := connect(t, testConfig(t, px.URL(), 2))
	px.Stall()
	done := sendAsync(t, b, g.ID, "committed, PUBACK lost", 20*time.Second)
	var seq int64
	db := mustConn(t, url)
	testkit.WaitFor(t, 10*time.Second, "the message to commit", func() bool {
		err := db.QueryRow(context.Background(),
			`SELECT seq FROM message WHERE conversation_id = $1 AND sender_id = 2 AND kind = 'message'`, g.ID).Scan(&seq)
		return err == nil
	})
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	px.Kill() // the PUBACK never reaches the client: it re-publishes
	r := <-done
	if r.err != nil || r.seq != seq {
		t.Fatalf("Send of a message committed before the removal: seq %d, err %v; want seq %d", r.seq, r.err, seq)
	}
}

// TestTheOwedTailOfAConversationLeftWhileOfflineDoesNotBringItBackToPositions:
// on a persistent session chatd replays what a conversation left while
// offline still owed (up to the leave) beside the inbox read that drops
// it from Positions. Entries of that tail that arrive after the inbox
// read are handed on (they are the user's) but must not make the
// conversation tracked again: no member.removed will come to forget it.
// A member.added of the user starts it again.
func TestTheOwedTailOfAConversationLeftWhileOfflineDoesNotBringItBackToPositions(t *testing.T) {
	srv, _, a, _ := sender(t)
	g, b, _ := removedWhileOffline(t, srv, a, "tail after the inbox") // seqs 1, 2
	// An entry of the owed tail that comes after the inbox read.
	handOwedEntry(t, b, g.ID, 3)
	if h, ok := b.Positions()[g.ID]; ok {
		t.Fatalf("the group is back in Positions (at %d) after a late entry of what its leave owed", h)
	}

	// Added back: tracked again from its events.
	if _, err := a.AddMember(ctxFor(t, 30*time.Second), g.ID, 2); err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 1, "back")
	testkit.WaitFor(t, 15*time.Second, "the group to be tracked again after the re-add", func() bool {
		_, ok := b.Positions()[g.ID]
		return ok
	})
}

// removeWhileOffline has a remove user 2 from conv while their client b
// is cut off (through px), then lets b back, and returns once conv left
// b's positions.
func removeWhileOffline(t *testing.T, ctx context.Context, a, b *client.Client, px *proxy, conv int64) {
	t.Helper()
	cutOff(t, px, b)
	if err := a.RemoveMember(ctx, conv, 2); err != nil {
		t.Fatal(err)
	}
	px.Resume()
	testkit.WaitFor(t, 15*time.Second, "the group to leave user 2's positions", func() bool {
		_, ok := b.Positions()[conv]
		return !ok
	})
}

// removedWhileOffline has a (user 1) make group title with user 2, whose
// client b (a persistent session, so the inbox is read beside the
// replay) reads its first 2 messages, is cut off, is removed from the
// group while offline and comes back: it returns once the group has left
// b's Positions, with b's Positions of before the removal.
func removedWhileOffline(t *testing.T, srv *server.Server, a *client.Client, title string) (client.Conversation, *client.Client, map[int64]int64) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	g, err := a.CreateGroup(ctx, title, []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	cfg.SessionDir = t.TempDir()
	b := connect(t, cfg)
	sendN(t, a, g.ID, 2, "m")
	messages(t, b, g.ID, 2, 10*time.Second)
	before := b.Positions()
	if before[g.ID] != 2 {
		t.Fatalf("position of the group %d, want 2", before[g.ID])
	}

	removeWhileOffline(t, ctx, a, b, px, g.ID)
	return g, b, before
}

// TestTheOwedTailOfAConversationLeftLiveDoesNotBringItBackToPositions: a
// connected session whose stream of a group lags gets the user's
// member.removed first and then the entries committed before the removal
// that had not reached it (docs/protocol.md "Events"). Those are handed
// on (they are the user's) but must not make the group tracked again:
// the live member.removed dropped it from Positions, and none will come
// again to drop it.
func TestTheOwedTailOfAConversationLeftLiveDoesNotBringItBackToPositions(t *testing.T) {
	t.Parallel()
	_, broker, a, _ := sender(t)
	b := connect(t, testConfig(t, broker, 2))
	ctx := ctxFor(t, 30*time.Second)
	g, err := a.CreateGroup(ctx, "tail after member.removed", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 1, "m") // seq 1
	messages(t, b, g.ID, 1, 10*time.Second)
	// Seq 2 has not reached user 2's connection when the removal does.
	dropMessages(b, 2, 2)
	sendN(t, a, g.ID, 1, "owed") // seq 2
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
		return ev.Type == client.EventMemberRemoved && ev.ConversationID == g.ID && ev.UserID == 2
	}) {
		t.Fatal("no member.removed for user 2 within 10s")
	}
	if h, ok := b.Positions()[g.ID]; ok {
		t.Fatalf("the group is in Positions (at %d) after member.removed", h)
	}
	b.DropEvents(nil)
	// The owed entry, after member.removed.
	handOwedEntry(t, b, g.ID, 2)
	if h, ok := b.Positions()[g.ID]; ok {
		t.Fatalf("the group is back in Positions (at %d) after an owed entry that came after member.removed", h)
	}

	// Added back: tracked again from its events.
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 1, "back")
	testkit.WaitFor(t, 15*time.Second, "the group to be tracked again after the re-add", func() bool {
		_, ok := b.Positions()[g.ID]
		return ok
	})
}

// TestAConversationLeftLiveAndRejoinedWhileOfflineIsTrackedAgain: a
// conversation the user left while connected is marked gone (what its
// leave owed is handed on untracked); added back while offline, the user
// gets no member.added (it is not replayed), so the catch-up's inbox,
// which lists the conversation again, has to end the mark, even when no
// other conversation is tracked.
func TestAConversationLeftLiveAndRejoinedWhileOfflineIsTrackedAgain(t *testing.T) {
	t.Parallel()
	a, b, g, px := leftLiveAndAddedBackOffline(t, nil)
	px.Resume()
	if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	seq := sendN(t, a, g.ID, 1, "back")[0]
	if m := messages(t, b, g.ID, 1, 10*time.Second); m[0].Seq != seq {
		t.Fatalf("first message after the re-add %+v, want seq %d", m[0], seq)
	}
	if h, ok := b.Positions()[g.ID]; !ok || h != seq {
		t.Fatalf("the group in Positions: %d %v, want tracked again at %d after the re-add", h, ok, seq)
	}
}

// TestAMessageArrivingBeforeTheCatchUpOfARejoinedConversationIsTracked:
// chatd hands on events as soon as the subscription is in, so the first
// message of a conversation the user left live and was added back to
// while offline can reach the client before its catch-up has read the
// inbox. It must wait for that read, which ends the gone mark: handed on
// before it, it would be taken for what the leave owed, and the
// conversation would be tracked again only from its next message.
func TestAMessageArrivingBeforeTheCatchUpOfARejoinedConversationIsTracked(t *testing.T) {
	t.Parallel()
	a, b, g, px := leftLiveAndAddedBackOffline(t, nil)
	subscribed, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.OnSubscribed(func() {
		once.Do(func() { close(subscribed); <-release })
	})
	queued := make(chan struct{}, 1)
	b.DropEvents(func(p []byte) bool {
		b.InjectEvent(p) // queued by the time the signal is seen
		select {
		case queued <- struct{}{}:
		default:
		}
		return true
	})
	px.Resume()
	testkit.Receive(t, subscribed, 15*time.Second, "user 2 did not subscribe again within 15s")
	seq := sendN(t, a, g.ID, 1, "back")[0]
	testkit.Receive(t, queued, 10*time.Second, "the message after the re-add did not reach user 2 within 10s")
	b.DropEvents(nil)
	close(release)
	if m := messages(t, b, g.ID, 1, 10*time.Second); m[0].Seq != seq {
		t.Fatalf("first message after the re-add %+v, want seq %d", m[0], seq)
	}
	if h, ok := b.Positions()[g.ID]; !ok || h != seq {
		t.Fatalf("the group in Positions: %d %v, want tracked again at %d after the re-add", h, ok, seq)
	}
	sendN(t, a, g.ID, 1, "and on")
	if m := messages(t, b, g.ID, 1, 10*time.Second); m[0].Seq != seq+1 {
		t.Fatalf("message after %d: %+v, want seq %d once", seq, m[0], seq+1)
	}
}

// leftLiveAndAddedBackOffline has a (user 1) make a group with user 2,
// whose ephemeral client b (through px; the group is all it tracks)
// reads its first message and its member.removed live, is cut off, and
// is added back while offline (after away, if not nil, ran). px stays
// cut: the caller resumes it.
func leftLiveAndAddedBackOffline(t *testing.T, away func(a *client.Client, g client.Conversation)) (a, b *client.Client, g client.Conversation, px *proxy) {
	t.Helper()
	return leftLiveAndAddedBackOfflineWith(t, func(*client.Config) {}, away)
}

// leftLiveAndAddedBackOfflineWith is leftLiveAndAddedBackOffline with
// b's configuration changed by tweak (a SessionDir: a persistent session).
func leftLiveAndAddedBackOfflineWith(t *testing.T, tweak func(*client.Config), away func(a *client.Client, g client.Conversation)) (a, b *client.Client, g client.Conversation, px *proxy) {
	t.Helper()
	srv, _, a, _ := sender(t)
	ctx := ctxFor(t, 30*time.Second)
	g, err := a.CreateGroup(ctx, "left and back", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	px = newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	tweak(&cfg)
	b = connect(t, cfg)
	sendN(t, a, g.ID, 1, "m")
	messages(t, b, g.ID, 1, 10*time.Second)
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, b, client.EventMemberRemoved, 10*time.Second)

	cutOff(t, px, b)
	if away != nil {
		away(a, g)
	}
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	return a, b, g, px
}

// TestWhatFollowsTheJoinOfAConversationRejoinedWhileOfflineIsCaughtUp: a
// user removed live and added back while offline is owed what followed
// the new join (docs/protocol.md: a persistent session gets it
// replayed); an ephemeral client catches it up through history, as for
// any conversation it tracks, from where it was at the leave.
func TestWhatFollowsTheJoinOfAConversationRejoinedWhileOfflineIsCaughtUp(t *testing.T) {
	t.Parallel()
	a, b, g, px := leftLiveAndAddedBackOffline(t, nil)
	missed := sendN(t, a, g.ID, 2, "while offline")
	px.Resume()
	if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	live := sendN(t, a, g.ID, 1, "live")[0]
	m := messages(t, b, g.ID, 3, 10*time.Second)
	if m[0].Seq != missed[0] || m[2].Seq != live {
		t.Fatalf("messages after the re-add %d..%d, want %d..%d", m[0].Seq, m[2].Seq, missed[0], live)
	}
	if h := b.Positions()[g.ID]; h != live {
		t.Fatalf("the group in Positions at %d, want %d", h, live)
	}
}

// TestWhatWasWrittenWhileAwayFromAGroupWithAllHistoryIsCaughtUpToo: in a
// group whose history is "all", the user added back may read what was
// written while they were away; an ephemeral client that tracked the
// group before the leave catches the group up from there through
// history, in seq order and without gaps, as it does for a group it
// tracked all along.
func TestWhatWasWrittenWhileAwayFromAGroupWithAllHistoryIsCaughtUpToo(t *testing.T) {
	t.Parallel()
	caughtUpFromTheLeave(t, func(*client.Config) {}, false)
}

// TestWhatWasWrittenWhileAwayFromAGroupWithAllHistoryIsCaughtUpOnAPersistentSession:
// on a persistent session chatd replays what followed the re-add (the
// user a member again) as the client reconnects, before its catch-up has
// read the inbox; what was written while the user was away, which no
// replay brings, still comes from history, before the replayed entries
// and without a gap.
func TestWhatWasWrittenWhileAwayFromAGroupWithAllHistoryIsCaughtUpOnAPersistentSession(t *testing.T) {
	t.Parallel()
	caughtUpFromTheLeave(t, func(cfg *client.Config) { cfg.SessionDir = t.TempDir() }, true)
}

// caughtUpFromTheLeave has user 2 (b's configuration changed by tweak)
// removed live from a group, which is made one whose history is "all"
// and written to while they are away, added back while offline (and,
// with afterReAdd, written to again before b reconnects), and checks that
// b hands on the group's entries from the leave on in seq order, without
// a gap, the message written while away among them from history.
func caughtUpFromTheLeave(t *testing.T, tweak func(*client.Config), afterReAdd bool) {
	t.Helper()
	var awaySeq int64
	a, b, g, px := leftLiveAndAddedBackOfflineWith(t, tweak, func(a *client.Client, g client.Conversation) {
		if _, err := a.UpdateGroup(ctxFor(t, 10*time.Second), g.ID, client.GroupUpdate{HistoryVisible: new("all")}); err != nil {
			t.Fatal(err)
		}
		awaySeq = sendN(t, a, g.ID, 1, "while away")[0]
	})
	if afterReAdd {
		sendN(t, a, g.ID, 1, "after the re-add, before the reconnection")
	}
	px.Resume()
	if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	live := sendN(t, a, g.ID, 1, "live")[0]
	var seqs []int64
	sawAway := false
	if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != g.ID || ev.Seq == 0 {
			return false
		}
		if len(seqs) > 0 && ev.Seq != seqs[len(seqs)-1]+1 {
			t.Fatalf("entry %d after %d: a gap or a repeat", ev.Seq, seqs[len(seqs)-1])
		}
		seqs = append(seqs, ev.Seq)
		sawAway = sawAway || ev.Seq == awaySeq && ev.Type == client.EventMessageNew && ev.FromHistory
		return ev.Seq == live
	}) {
		t.Fatalf("entries of the group %v within 10s, want up to %d", seqs, live)
	}
	if !sawAway || seqs[0] > awaySeq {
		t.Fatalf("entries %v; want the message written while away, seq %d, from history", seqs, awaySeq)
	}
}
