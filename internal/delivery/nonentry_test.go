package delivery_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// events counts the events of type typ c was sent for conv.
func events(c *fakeConn, typ string, conv int64) int {
	n := 0
	for _, p := range c.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.Type == typ && ev.ConversationID == conv {
			n++
		}
	}
	return n
}

// nodeOfRecord is a group of users 1, 2 and 3 in a store whose commits a
// test hands to the hub itself: at once, as this node's own, or late, as
// another node's relay would.
func nodeOfRecord(t *testing.T) (st *store.Store, f fixture, rec *recorder, conv chat.Conversation, h *delivery.Hub) {
	t.Helper()
	rec = &recorder{}
	st, pool := pgtest.NewStore(t, chat.DefaultLimits(), store.WithPublisher(rec))
	sessions := store.NewSessions(pool)
	conv, _, err := st.CreateGroup(context.Background(), chat.GroupRequest{CreatorID: 1, Title: "settings", Members: []int64{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	rec.take() // conversation.created: the sessions read it from PostgreSQL
	return st, fixture{pool: pool, st: st, sessions: sessions}, rec, conv, startHub(t, sessions, delivery.Options{})
}

// removedElsewhere is a group whose member 3 another node removed: this
// node's sessions of stays and of user 3 got the entries sent (sent),
// and the removal (removal) waits on the relay, late.
type removedElsewhere struct {
	st             *store.Store
	rec            *recorder
	conv           chat.Conversation
	h              *delivery.Hub
	stays, removed *fakeConn
	sent, removal  []chat.Event
}

// removeElsewhere attaches sessions of stays and of user 3, has send's
// entries delivered to both, then removes user 3 (by user 1) and keeps
// the removal from the hub, as a lagging relay would.
func removeElsewhere(t *testing.T, stays int64, send func(st *store.Store, rec *recorder, conv int64) []chat.Event) *removedElsewhere {
	t.Helper()
	st, f, rec, conv, h := nodeOfRecord(t)
	r := &removedElsewhere{st: st, rec: rec, conv: conv, h: h,
		stays:   attachUser(t, h, f, "stays", stays, false, true, true),
		removed: attachUser(t, h, f, "removed", 3, false, true, true)}
	r.sent = send(st, rec, conv.ID)
	for _, ev := range r.sent {
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "both sessions to get the messages", func() bool {
		return len(r.stays.seqs(conv.ID)) == len(r.sent) && len(r.removed.seqs(conv.ID)) == len(r.sent)
	})
	if err := st.RemoveMember(context.Background(), conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	r.removal = r.rec.take()
	return r
}

// routeHere hands evs, committed on this node after the removal, to the
// hub at once, waits until the session that stays shows what it must
// (got), and checks that no client saw the sessions' position (lastSeq).
func (r *removedElsewhere) routeHere(t *testing.T, evs []chat.Event, what string, got func() bool) {
	t.Helper()
	for _, ev := range evs {
		r.h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, what, got)
	for _, p := range r.stays.packets() {
		if strings.Contains(string(p.Payload), `"lastSeq"`) {
			t.Errorf("a client got an event with the sessions' position: %s", p.Payload)
		}
	}
}

// relayRemoval hands the removal to the hub, late, and checks that the
// removed member's session got no event of the types committed after it.
func (r *removedElsewhere) relayRemoval(t *testing.T, types ...string) {
	t.Helper()
	for _, ev := range r.removal {
		r.h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the removal delivered", func() bool {
		return events(r.removed, chat.EventMemberRemoved, r.conv.ID) == 1
	})
	for _, typ := range types {
		if n := events(r.removed, typ, r.conv.ID); n != 0 {
			t.Errorf("the removed member got %d %s committed after their removal", n, typ)
		}
	}
}

// A member removed on another node stays in this node's member index
// until the relay brings the removal. Another member's read watermark and
// a role change, committed here after the removal, must not reach them
// meanwhile: they are no longer a member. The member who stays gets both.
func TestAMemberRemovedOnAnotherNodeGetsNoReadReceiptOrRoleChangeCommittedAfterTheRemoval(t *testing.T) {
	ctx := context.Background()
	r := removeElsewhere(t, 2, func(st *store.Store, rec *recorder, conv int64) []chat.Event {
		return sendSeqsAs(t, st, rec, conv, 1, 2)
	})
	if _, err := r.st.SetRole(ctx, r.conv.ID, 1, 2, chat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	now, err := r.st.GetConversation(ctx, r.conv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.MarkRead(ctx, r.conv.ID, 1, now.LastSeq); err != nil {
		t.Fatal(err)
	}
	r.routeHere(t, r.rec.take(), "the member who stays to get the role change and the read receipt", func() bool {
		return events(r.stays, chat.EventMemberUpdated, r.conv.ID) == 1 && events(r.stays, chat.EventReadUpdated, r.conv.ID) == 1
	})
	r.relayRemoval(t, chat.EventMemberUpdated, chat.EventReadUpdated)
}

// A member added on another node whose join the relay has not brought
// yet, but whom this node's member index lists already (it read the
// members again for a settings change, after the join committed): the
// group's new settings, committed here after the join, are theirs, and
// reach them although the session knows nothing of the conversation yet.
func TestAMemberAddedOnAnotherNodeGetsTheSettingsCommittedAfterTheJoinBeforeTheJoinIsRelayed(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, h := nodeOfRecord(t)
	late := attachUser(t, h, f, "late", 4, false, true, true) // no member yet
	stays := attachUser(t, h, f, "stays", 2, false, true, true)
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) { // warms the member index
		h.Deliver(ev)
	}
	waitSeqs(t, stays, conv.ID, 1)
	// Added elsewhere: this node's member index lacks them until the
	// settings change below makes it read the members again.
	if _, _, err := st.AddMember(ctx, conv.ID, 1, 4, chat.RoleMember); err != nil {
		t.Fatal(err)
	}
	join := rec.take()
	title := "renamed"
	if _, err := st.UpdateGroup(ctx, conv.ID, 1, chat.GroupUpdate{Title: &title}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range rec.take() { // committed here, routed at once
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the new member to get the new settings", func() bool {
		return events(late, chat.EventConversationUpdated, conv.ID) == 1
	})
	for _, ev := range join { // relayed late
		h.Deliver(ev)
	}
	testkit.Never(t, 500*time.Millisecond, "the new member to get the new settings twice", func() bool {
		return events(late, chat.EventConversationUpdated, conv.ID) > 1
	})
}

// sendSeqsAs commits n messages of sender in conv and returns their
// events as the store published them.
func sendSeqsAs(t *testing.T, st *store.Store, rec *recorder, conv, sender int64, n int) []chat.Event {
	t.Helper()
	svc := chat.NewService(st, chat.DefaultLimits())
	for range n {
		sendAs(t, fixture{svc: svc}, conv, sender)
	}
	return rec.take()
}

// Events that are not entries, in a session's mailbox with a resync
// (after the hub dropped events, or the session met a stray), are not
// read back by catch-up as entries are: they must still go out.
func TestPresenceAndReceiptsQueuedWithAResyncStillReachTheClient(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{})
	c, fc := attachGated(t, h, f, "u2", 2)
	h.SendDirect("u2", c, chat.Packet{Topic: "x", Payload: []byte("{}")})
	<-c.blocked // the pump is stuck in a write: what follows waits in its mailbox

	seq := sendAs(t, f, f.conv.ID, 2).Seq
	res, err := f.svc.MarkRead(context.Background(), f.conv.ID, 1, seq)
	if err != nil || !res.Advanced {
		t.Fatalf("mark read: %+v, %v", res, err)
	}
	online := true
	h.Resync() // the fan-out resyncs every session before it routes the next event
	h.Deliver(chat.Event{Type: chat.EventPresence, UserID: 1, Online: &online, To: []int64{2}})
	h.Deliver(chat.ReadEvent(f.conv.ID, 1, res.LastReadSeq))
	testkit.WaitFor(t, 5*time.Second, "the events to wait in the session's mailbox", func() bool {
		return h.Session("u2").Queued() >= 2
	})
	close(c.gate)
	testkit.WaitFor(t, 5*time.Second, "the presence event and the read receipt to reach the client", func() bool {
		return events(fc, chat.EventPresence, 0) == 1 && events(fc, chat.EventReadUpdated, f.conv.ID) == 1
	})
}

// The removed user's member.removed is not one of their own requests'
// answers: a client that floods refused publishes, whose error events
// wait unwritten up to QueueSize, still hears that it was removed.
func TestARemovedUserHearsOfTheRemovalWhileTheirQueueIsFullOfRefusals(t *testing.T) {
	f := setup(t)
	const qs = 4
	h := newHub(t, f, delivery.Options{QueueSize: qs})
	c, fc := attachGated(t, h, f, "u2", 2)
	h.Publish(sendAs(t, f, f.conv.ID, 1)) // warms the member index
	<-c.blocked                           // the pump is stuck writing it
	for range qs {                        // the client's refused publishes' error events
		h.SendDirect("u2", c, chat.Packet{Topic: "x", Payload: []byte(`{"type":"error"}`), QoS: 1})
	}
	removeAndTell(t, h, f)
	online := true // routed after the removal: once it waits, so did the removal
	h.Deliver(chat.Event{Type: chat.EventPresence, UserID: 1, Online: &online, To: []int64{2}})
	testkit.WaitFor(t, 5*time.Second, "the removal to wait in the session's mailbox", func() bool {
		return h.Session("u2").Queued() >= qs+2 // the refusals, the leave, the presence (and the notice)
	})
	close(c.gate)
	testkit.WaitFor(t, 5*time.Second, "the removed user to get member.removed", func() bool {
		return events(fc, chat.EventMemberRemoved, f.conv.ID) == 1
	})
}

// A read watermark that moves after a member's removal to a seq from
// before it (the reader is catching up on older messages) is no more the
// removed member's than one past it: their session, which the relay has
// not told of the removal yet, does not show it. The event carries the
// conversation's last_seq as the watermark moved, and the session shows it
// only once it has every entry up to that.
func TestAMemberRemovedOnAnotherNodeGetsNoReadReceiptOfAnOlderMessageCommittedAfterTheRemoval(t *testing.T) {
	r := removeElsewhere(t, 2, func(st *store.Store, rec *recorder, conv int64) []chat.Event {
		return sendSeqsAs(t, st, rec, conv, 1, 2)
	})
	if _, err := r.st.MarkRead(context.Background(), r.conv.ID, 2, r.sent[0].Seq); err != nil { // here, after the removal
		t.Fatal(err)
	}
	r.routeHere(t, r.rec.take(), "the reader's own session to get the read receipt", func() bool {
		return events(r.stays, chat.EventReadUpdated, r.conv.ID) == 1
	})
	r.relayRemoval(t, chat.EventReadUpdated)
}

// A read receipt waiting for the entry it came after (relayed late from
// another node) goes out before a later one that comes with that entry:
// the client keeps the last watermark it hears, which must be the newest.
func TestAReadReceiptWaitingForItsEntryGoesOutBeforeALaterOneThatCameWithIt(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, h := nodeOfRecord(t)
	if _, err := f.sessions.Open(ctx, "u2", "", 2, false, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	fc := newConn("u2", true)
	fc.hub = h
	c := &stepConn{fakeConn: fc, writes: make(chan []chat.Ack, 8), step: make(chan struct{})}
	fc.self = c
	h.Attach(c, "u2", 2, false, true, 0)
	<-h.Session("u2").Loaded()
	written := func() {
		t.Helper()
		testkit.Receive(t, c.writes, 10*time.Second, "no write")
	}
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) {
		h.Deliver(ev)
	}
	written() // the pump is stuck writing the first message

	late := sendSeqsAs(t, st, rec, conv.ID, 1, 1) // relayed late
	seq := late[0].Seq
	if _, err := st.MarkRead(ctx, conv.ID, 3, seq-1); err != nil {
		t.Fatal(err)
	}
	older := rec.take()
	if _, err := st.MarkRead(ctx, conv.ID, 3, seq); err != nil {
		t.Fatal(err)
	}
	newer := rec.take()
	online := true
	for _, ev := range older { // committed here, routed at once: it waits for seq
		h.Deliver(ev)
	}
	h.Deliver(chat.Event{Type: chat.EventPresence, UserID: 1, Online: &online, To: []int64{2}})
	testkit.WaitFor(t, 5*time.Second, "the receipt and the presence to wait in the mailbox", func() bool {
		return h.Session("u2").Queued() >= 2
	})
	c.step <- struct{}{}
	written() // the presence: the older receipt waits for its entry
	for _, ev := range append(late, newer...) {
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the entry and the newer receipt to wait in the mailbox", func() bool {
		return h.Session("u2").Queued() >= 2
	})
	close(c.step)
	testkit.WaitFor(t, 5*time.Second, "both receipts to reach the client", func() bool {
		return events(fc, chat.EventReadUpdated, conv.ID) == 2
	})
	var got []int64
	for _, p := range fc.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.Type == chat.EventReadUpdated {
			got = append(got, ev.Seq)
		}
	}
	if want := []int64{seq - 1, seq}; !slices.Equal(got, want) {
		t.Fatalf("read.updated seqs in the order sent: %v, want %v", got, want)
	}
}

// A delivered watermark that moves after a sender's removal, over a
// message they sent before it, is no more theirs than a read receipt is:
// their session, which the relay has not told of the removal yet, does
// not show them the tick. The sender who stays gets theirs.
func TestASenderRemovedOnAnotherNodeGetsNoDeliveredTickCommittedAfterTheRemoval(t *testing.T) {
	r := removeElsewhere(t, 1, func(st *store.Store, rec *recorder, conv int64) []chat.Event {
		return append(sendSeqsAs(t, st, rec, conv, 3, 1), sendSeqsAs(t, st, rec, conv, 1, 1)...)
	})
	rc, err := store.NewReceipts(r.st, store.ReceiptsConfig{DeliveredInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close(context.Background()) })
	rc.Delivered(r.conv.ID, 2, r.sent[1].Seq) // here, after the removal: over both senders' messages
	var ticks []chat.Event
	testkit.WaitFor(t, 5*time.Second, "the delivered flush", func() bool {
		ticks = append(ticks, r.rec.take()...)
		return len(ticks) == 2
	})
	r.routeHere(t, ticks, "the sender who stays to get their tick", func() bool {
		return events(r.stays, chat.EventDeliveryUpdated, r.conv.ID) == 1
	})
	r.relayRemoval(t, chat.EventDeliveryUpdated)
}

// A read receipt that waits for entries the relay has not brought yet
// waits for them as for a gap, GapWait at most, then PostgreSQL fills
// them, even when the first of them comes live meanwhile and the rest
// stay on the relay.
func TestAReadReceiptWaitingForEntriesGoesOutAfterTheGapWaitThoughTheFirstCameLive(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	const gapWait = time.Second // the receipt and the first entry both arrive within it
	h := startHub(t, f.sessions, delivery.Options{GapWait: gapWait})
	u2 := attachUser(t, h, f, "u2", 2, false, true, true)
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) { // warms the member index
		h.Deliver(ev)
	}
	waitSeqs(t, u2, conv.ID, 1)

	late := sendSeqsAs(t, st, rec, conv.ID, 1, 2) // another node's, relayed late
	if _, err := st.MarkRead(ctx, conv.ID, 3, late[0].Seq); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, ev := range append(rec.take(), late[0]) { // the receipt here, then the first entry live
		h.Deliver(ev)
	}
	waitSeqs(t, u2, conv.ID, 2)
	testkit.WaitFor(t, gapWait+5*time.Second, "the receipt to reach the client without the relay", func() bool {
		return events(u2, chat.EventReadUpdated, conv.ID) == 1
	})
	if got := u2.seqs(conv.ID); !slices.Equal(got, []int64{late[0].Seq - 1, late[0].Seq, late[1].Seq}) {
		t.Fatalf("messages %v, want the entry the receipt waited for before it", got)
	}
	t.Logf("the receipt went out after %v", time.Since(start))
}

// A member removed and added back here is not shown what was committed
// while they were away, although it reaches the node only after their
// return: another member's read watermark moved on another node while
// they were not a member, relayed late, is no more theirs than the entry
// committed meanwhile.
func TestAMemberAddedBackGetsNoReadReceiptCommittedWhileTheyWereAway(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, h := nodeOfRecord(t)
	stays := attachUser(t, h, f, "stays", 2, false, true, true)
	back := attachUser(t, h, f, "back", 3, false, true, true)
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 1) { // warms the member index
		h.Deliver(ev)
	}
	waitSeqs(t, back, conv.ID, 1)

	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil { // here
		t.Fatal(err)
	}
	for _, ev := range append(rec.take(), sendSeqsAs(t, st, rec, conv.ID, 1, 1)...) {
		h.Deliver(ev)
	}
	away := waitSeqs(t, stays, conv.ID, 2)[1]
	if _, err := st.MarkRead(ctx, conv.ID, 2, away); err != nil { // elsewhere, while they are away
		t.Fatal(err)
	}
	read := rec.take()
	// Elsewhere too: their return is past the watermark's place.
	read = append(read, sendSeqsAs(t, st, rec, conv.ID, 1, 1)...)
	if _, _, err := st.AddMember(ctx, conv.ID, 1, 3, chat.RoleMember); err != nil { // here
		t.Fatal(err)
	}
	for _, ev := range rec.take() {
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the member added back to hear of it", func() bool {
		return events(back, chat.EventMemberAdded, conv.ID) == 1
	})
	for _, ev := range append(read, sendSeqsAs(t, st, rec, conv.ID, 1, 1)...) { // relayed late, then an entry of theirs
		h.Deliver(ev)
	}
	testkit.WaitFor(t, 5*time.Second, "the entry after the late receipt to reach both members", func() bool {
		return len(back.seqs(conv.ID)) == 2 && len(stays.seqs(conv.ID)) == 4
	})
	if n := events(back, chat.EventReadUpdated, conv.ID); n != 0 {
		t.Fatalf("the member added back got %d read.updated committed while they were away", n)
	}
}
