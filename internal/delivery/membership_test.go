package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// failMembers fails the member lookup of one conversation at once.
type failMembers struct {
	chat.DeliveryStore
	conv int64
}

func (s *failMembers) Members(ctx context.Context, conv int64) (chat.Routing, error) {
	if conv == s.conv {
		return chat.Routing{}, errors.New("boom")
	}
	return s.DeliveryStore.Members(ctx, conv)
}

// blockingHandler blocks the goroutine that logs a message with prefix
// until released: here, the fan-out goroutine (membersLoaded's warning).
type blockingHandler struct {
	prefix  string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(func() { close(h.entered) })
		<-h.release
	}
	return nil
}
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler      { return h }

// overflowHub starts a hub with a queue of one whose fan-out can be
// stalled: stall blocks its goroutine (on a conversation whose members
// cannot be loaded) so that what is published next overflows the queue,
// and returns the func that releases it.
func overflowHub(t *testing.T, f fixture) (h *delivery.Hub, stall func() (release func())) {
	const bad = 987654321
	bh := &blockingHandler{prefix: "load members for fan-out failed", entered: make(chan struct{}), release: make(chan struct{})}
	h = startHub(t, &failMembers{DeliveryStore: f.sessions, conv: bad}, delivery.Options{HubQueue: 1, Logger: slog.New(bh)})
	return h, func() func() { return stallFanout(t, h, bh, bad) }
}

// stallFanout blocks the hub's fan-out goroutine; the returned func releases it.
// The queue (of one) may still hold the event published before, which
// drops the stalling one (an overflow, resynced like any other): it is
// published again until the fan-out takes it.
func stallFanout(t *testing.T, h *delivery.Hub, bh *blockingHandler, badConv int64) func() {
	deadline := time.After(10 * time.Second)
	for {
		h.Publish(chat.Event{Type: chat.EventTyping, ConversationID: badConv, UserID: 1})
		select {
		case <-bh.entered:
			return func() { close(bh.release) }
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("fan-out never stalled")
		}
	}
}

func sendAs(t *testing.T, f fixture, conv, sender int64) chat.Event {
	t.Helper()
	res, err := f.svc.Send(context.Background(), chat.SendRequest{ConversationID: conv, SenderID: sender, ClientMsgID: uuid.NewString(), Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return chat.MessageEvent(res.Message)
}

// A member.removed lost to a hub overflow leaves the fan-out's member
// index stale: the removed user keeps receiving the conversation's messages.
func TestAMemberRemovedWhileTheHubOverflowedGetsNoMoreOfTheConversation(t *testing.T) {
	f := setup(t)
	h, stall := overflowHub(t, f)
	u := attach(t, h, f, "u2", false, true) // user 2, member of f.conv
	h.Publish(sendAs(t, f, f.conv.ID, 1))   // warms the member index
	waitSeqs(t, u, f.conv.ID, 1)

	if err := f.svc.RemoveMember(context.Background(), f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	var last int64
	_ = f.pool.QueryRow(context.Background(), "SELECT last_seq FROM conversation WHERE id=$1", f.conv.ID).Scan(&last)
	release := stall()
	h.Publish(chat.Event{Type: chat.EventPresence})           // fills the queue of 1
	h.Publish(chat.MemberRemovedEvent(f.conv.ID, 2, 1, last)) // dropped: overflow
	release()

	ev := sendAs(t, f, f.conv.ID, 1) // user 2 is no longer a member
	h.Publish(ev)
	testkit.Never(t, time.Second, fmt.Sprintf("user 2, removed from the conversation, received message seq %d sent after the removal", ev.Seq),
		func() bool { return slices.Contains(u.seqs(f.conv.ID), ev.Seq) })
}

// A member.added lost to a hub overflow: the new member's sessions never
// get the conversation's live messages.
func TestAMemberAddedWhileTheHubOverflowedGetsTheConversationLive(t *testing.T) {
	f := setup(t)
	h, stall := overflowHub(t, f)
	u3 := attachUser(t, h, f, "u3", 3, true, true, true)
	obs := attach(t, h, f, "u2", false, true)
	h.Publish(sendAs(t, f, f.conv.ID, 1)) // warms the member index (1, 2)
	waitSeqs(t, obs, f.conv.ID, 1)

	if _, _, err := f.svc.AddMember(context.Background(), f.conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	conv, err := f.svc.GetConversation(context.Background(), f.conv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	release := stall()
	h.Publish(chat.Event{Type: chat.EventPresence})
	h.Publish(chat.MemberAddedEvent(conv, 3, 1, chat.RoleMember)) // dropped: overflow
	release()

	var evs []chat.Event
	for range 3 {
		ev := sendAs(t, f, f.conv.ID, 1)
		h.Publish(ev)
		evs = append(evs, ev)
	}
	waitSeqs(t, obs, f.conv.ID, 4)
	for _, ev := range evs {
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("new member 3 to receive message seq %d", ev.Seq),
			func() bool { return slices.Contains(u3.seqs(f.conv.ID), ev.Seq) })
	}
}

// Members read after a later membership change are applied to events that
// waited for them: a message sent before user 3 joined reaches user 3.
func TestAnEntryFromBeforeAJoinDoesNotReachTheNewMemberWhoseJoinCommittedWhileMembersLoaded(t *testing.T) {
	f := setup(t)
	if _, err := f.pool.Exec(context.Background(), "UPDATE conversation SET history_visible='joined' WHERE id=$1", f.conv.ID); err != nil {
		t.Fatal(err)
	}
	slow := &slowMembers{DeliveryStore: f.sessions, conv: f.conv.ID, release: make(chan struct{})}
	h := startHub(t, slow, delivery.Options{})
	u3 := attachUser(t, h, f, "u3", 3, true, true, true)
	obs := attach(t, h, f, "u2", false, true)
	before := sendAs(t, f, f.conv.ID, 1) // user 3 not a member yet
	h.Publish(before)                    // waits for the member lookup
	if _, _, err := f.svc.AddMember(context.Background(), f.conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	conv, err := f.svc.GetConversation(context.Background(), f.conv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	conv.LastSeq = before.Seq                                     // the join's seq, as the store publishes it
	h.Publish(chat.MemberAddedEvent(conv, 3, 1, chat.RoleMember)) // behind the message
	close(slow.release)                                           // the lookup reads the members now: user 3 included
	waitSeqs(t, obs, f.conv.ID, 1)
	testkit.Never(t, 500*time.Millisecond, fmt.Sprintf("user 3 received seq %d, sent before they joined (history_visible=joined)", before.Seq),
		func() bool { return slices.Contains(u3.seqs(f.conv.ID), before.Seq) })
}

// ... and a message sent while user 2 was a member never reaches user 2
// when the removal commits before the lookup reads the members.
func TestAnEntryFromBeforeARemovalReachesTheRemovedMemberWhoseRemovalCommittedWhileMembersLoaded(t *testing.T) {
	f := setup(t)
	slow := &slowMembers{DeliveryStore: f.sessions, conv: f.conv.ID, release: make(chan struct{})}
	h := startHub(t, slow, delivery.Options{})
	u2 := attach(t, h, f, "u2", true, true)
	obs := attachUser(t, h, f, "u1", 1, false, true, true)
	ev := sendAs(t, f, f.conv.ID, 1) // user 2 is a member
	h.Publish(ev)
	if err := f.svc.RemoveMember(context.Background(), f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	h.Publish(chat.MemberRemovedEvent(f.conv.ID, 2, 1, ev.Seq)) // as the store publishes it, behind the message
	close(slow.release)
	waitSeqs(t, obs, f.conv.ID, 1)
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("user 2 to receive seq %d, committed while they were a member", ev.Seq),
		func() bool { return slices.Contains(u2.seqs(f.conv.ID), ev.Seq) })
}

// gateConn is a fakeConn whose writes block while the gate is closed.
type gateConn struct {
	*fakeConn
	gate    chan struct{}
	blocked chan struct{}
	once    sync.Once
}

// attachGated attaches session id of user (not persistent) over a
// gateConn, and returns it and the fakeConn it writes to.
func attachGated(t *testing.T, h *delivery.Hub, f fixture, id string, user int64) (*gateConn, *fakeConn) {
	t.Helper()
	fc := newConn(id, true)
	fc.hub = h
	c := &gateConn{fakeConn: fc, gate: make(chan struct{}), blocked: make(chan struct{})}
	fc.self = c
	attachConn(t, h, f, c, id, user, false, true)
	return c, fc
}

func (c *gateConn) Write(a []chat.Ack, ps []chat.Packet) error {
	select {
	case <-c.gate:
	default:
		c.once.Do(func() { close(c.blocked) })
		<-c.gate
	}
	return c.fakeConn.Write(a, ps)
}

// A join that reaches a non-persistent session in the same mailbox as a
// resync is dropped with the live events; the resync then starts the new
// conversation at last_seq, so what was sent since the join is lost.
func TestAJoinThatReachesASessionWithAResyncDeliversWhatFollowedTheJoin(t *testing.T) {
	testResyncJoin(t, 2)
}
func TestAJoinWithoutAResyncDeliversWhatFollowedTheJoin(t *testing.T) { testResyncJoin(t, 1024) }
func testResyncJoin(t *testing.T, qs int) {
	f := setup(t)
	h := startHub(t, f.sessions, delivery.Options{QueueSize: qs})
	c, fc := attachGated(t, h, f, "u3", 3)
	obs := attach(t, h, f, "u2", false, true)
	h.Publish(sendAs(t, f, f.conv.ID, 1)) // warms the index
	waitSeqs(t, obs, f.conv.ID, 1)

	h.SendDirect("u3", c, chat.Packet{Topic: "x", Payload: []byte("{}")})
	<-c.blocked // u3's pump is stuck in a write (a slow socket)
	if _, _, err := f.svc.AddMember(context.Background(), f.conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	conv, _ := f.svc.GetConversation(context.Background(), f.conv.ID, 1)
	h.Publish(chat.MemberAddedEvent(conv, 3, 1, chat.RoleMember))
	var want []int64
	for range 4 {
		ev := sendAs(t, f, f.conv.ID, 1)
		h.Publish(ev)
		want = append(want, ev.Seq)
	}
	waitSeqs(t, obs, f.conv.ID, 5) // routed everywhere
	close(c.gate)
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("user 3 (joined, then sent %v) to receive them all", want),
		func() bool { return len(fc.seqs(f.conv.ID)) >= len(want) })
	if got := fc.seqs(f.conv.ID); !slices.Equal(got, want) {
		t.Fatalf("user 3 (joined, then sent %v) received %v", want, got)
	}
}

// A PUBACK the old connection reads after a takeover answers the old
// session's packet id; the new session reuses ids from 1, so taking it
// for its own would release the window (and, for a persistent session,
// move the delivered cursor) past a delivery the client never
// acknowledged.
func TestAPubackFromTheConnectionATakeoverReplacedAcknowledgesNothing(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 1})
	old := attach(t, h, f, "phone", true, false)
	cur := attach(t, h, f, "phone", true, false) // takes over
	publishEach(h, f.send(t, 2))
	waitSeqs(t, cur, f.conv.ID, 1) // the window of one is full
	first := cur.packets()[0].PacketID
	h.Acked("phone", old, first)
	testkit.Never(t, 500*time.Millisecond, fmt.Sprintf("the old connection's PUBACK of packet %d released the new session's window", first),
		func() bool { return len(cur.seqs(f.conv.ID)) > 1 })
	h.Acked("phone", cur, first)
	wantExactly(t, waitSeqs(t, cur, f.conv.ID, 2), 1, 2)
}

// Two connections of one client id attaching at the same instant: one
// session is left, the later attach's, and the other is stopped, not left
// routed the user's events (and counted online) beside it until a write of
// its fails.
func TestTwoConnectionsOfOneClientAttachingAtOnceLeaveOneSession(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{})
	for i := range 100 {
		id := fmt.Sprint("twin", i)
		a, b := newConn(id, true), newConn(id, true)
		a.hub, b.hub = h, h
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range []*fakeConn{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h.Attach(c, id, 2, false, true, 0)
			}()
		}
		close(start)
		wg.Wait()
		h.Detach(id, a)
		h.Detach(id, b)
		if h.Online(2) {
			t.Fatalf("attempt %d: user 2 is online with both connections of %s detached", i, id)
		}
	}
}

// A persistent session's member removed while deliveries of the
// conversation are unacknowledged, then added back: after a reconnect the
// client still gets what the old membership owed (up to the removal), then
// what follows the re-add, and nothing committed while they were away.
func TestAReAddedMembersUnacknowledgedTailOfTheOldMembershipSurvivesAReconnect(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 8, CursorFlush: 10 * time.Millisecond})
	u := attach(t, h, f, "phone", true, false) // acknowledges nothing
	owed := f.send(t, 3)
	publishEach(h, owed)
	waitSeqs(t, u, f.conv.ID, 3)

	removeAndTell(t, h, f)
	away := sendAs(t, f, f.conv.ID, 1)
	h.Publish(away)
	join(t, h, f, 2)
	after := sendAs(t, f, f.conv.ID, 1)
	h.Publish(after)
	testkit.WaitFor(t, 10*time.Second, "the message after the re-add to reach the connected session",
		func() bool { return slices.Contains(u.seqs(f.conv.ID), after.Seq) })

	h.Detach("phone", u)
	u2 := attach(t, h, f, "phone", true, true)
	want := []int64{owed[0].Seq, owed[1].Seq, owed[2].Seq, after.Seq}
	got := waitSeqs(t, u2, f.conv.ID, len(want))
	testkit.Never(t, 300*time.Millisecond, fmt.Sprintf("more than %v after the reconnect", want),
		func() bool { return len(u2.seqs(f.conv.ID)) > len(want) })
	if !slices.Equal(got, want) {
		t.Fatalf("after the reconnect: %v, want the old membership's tail and what followed the re-add %v (not %d, sent while away)", got, want, away.Seq)
	}
}

// A removal and a re-add both lost to a hub overflow: the session's stream
// is of the old membership, and the resync finds the user a member again
// with a later join. What was committed while they were away is not
// theirs; what follows the re-add is.
func TestAMemberRemovedAndAddedBackWhileTheHubOverflowedGetsWhatFollowsTheRejoinOnly(t *testing.T) {
	f := setup(t)
	h, stall := overflowHub(t, f)
	u := attach(t, h, f, "u2", false, true) // user 2, member of f.conv
	first := sendAs(t, f, f.conv.ID, 1)
	h.Publish(first) // warms the member index
	waitSeqs(t, u, f.conv.ID, 1)

	ctx := context.Background()
	if err := f.svc.RemoveMember(ctx, f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	away := sendAs(t, f, f.conv.ID, 1) // user 2 is not a member
	if _, _, err := f.svc.AddMember(ctx, f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	conv, err := f.svc.GetConversation(ctx, f.conv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	release := stall()
	h.Publish(chat.Event{Type: chat.EventPresence})                // fills the queue of 1
	h.Publish(chat.MemberRemovedEvent(f.conv.ID, 2, 1, first.Seq)) // dropped: overflow
	h.Publish(away)                                                // dropped
	h.Publish(chat.MemberAddedEvent(conv, 2, 1, chat.RoleMember))  // dropped
	release()

	back := sendAs(t, f, f.conv.ID, 1)
	h.Publish(back)
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("user 2, added back, to receive message seq %d sent after the re-add", back.Seq),
		func() bool { return slices.Contains(u.seqs(f.conv.ID), back.Seq) })
	if got, want := u.seqs(f.conv.ID), []int64{first.Seq, back.Seq}; !slices.Equal(got, want) {
		t.Fatalf("user 2 received %v, want %v (seq %d was sent while they were away)", got, want, away.Seq)
	}
}

// gatedSince holds user's first catch-up read from PostgreSQL until
// released, as a query in flight while other transactions commit.
type gatedSince struct {
	chat.DeliveryStore
	user             int64
	entered, release chan struct{}
	once             sync.Once
}

func (s *gatedSince) SinceMany(ctx context.Context, user int64, ranges []chat.Range, perConv int) (map[int64][]chat.Message, error) {
	if user == s.user {
		s.once.Do(func() {
			close(s.entered)
			<-s.release
		})
	}
	return s.DeliveryStore.SinceMany(ctx, user, ranges, perConv)
}

// A session catching up from PostgreSQL reads what is committed when its
// query runs. When the user's removal commits before that, and their
// member.removed has not reached the session yet, the read must still end
// at what they were owed: a message sent after the removal is not theirs.
func TestARemovedMemberCatchingUpFromPostgreSQLGetsNothingCommittedAfterTheRemoval(t *testing.T) {
	f := setup(t)
	gate := &gatedSince{DeliveryStore: f.sessions, user: 2, entered: make(chan struct{}), release: make(chan struct{})}
	h := startHub(t, gate, delivery.Options{RecentPerConv: -1}) // no cache: catch-up reads PostgreSQL
	obs := attachUser(t, h, f, "u1", 1, false, true, true)
	u2 := attachUser(t, h, f, "u2", 2, false, true, false) // not subscribed yet: falls behind
	var owed []int64
	for range 3 {
		ev := sendAs(t, f, f.conv.ID, 1)
		h.Publish(ev)
		owed = append(owed, ev.Seq)
	}
	waitSeqs(t, obs, f.conv.ID, 3)
	h.SetReady("u2", u2, true) // catch-up: its query waits at the gate
	testkit.Receive(t, gate.entered, 10*time.Second, "the session never read PostgreSQL")
	if err := f.svc.RemoveMember(context.Background(), f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	after := sendAs(t, f, f.conv.ID, 1) // user 2 is no longer a member
	h.Publish(chat.MemberRemovedEvent(f.conv.ID, 2, 1, owed[len(owed)-1]))
	h.Publish(after)
	waitSeqs(t, obs, f.conv.ID, 4)
	close(gate.release)
	receivedOwedOnly(t, u2, f.conv.ID, owed, after.Seq)
}

// heldCursors reads client's positions, then holds them until released:
// what commits meanwhile is newer than what the session starts from.
type heldCursors struct {
	chat.DeliveryStore
	client       string
	read, answer chan struct{}
}

func (s *heldCursors) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	cs, err := s.DeliveryStore.Cursors(ctx, clientID, userID, stored)
	if clientID == s.client {
		close(s.read)
		<-s.answer
	}
	return cs, err
}

// The recent cache holds what the fan-out routed to anyone. A session
// whose user was removed while it read its starting positions has the
// member.removed waiting in its mailbox when it first catches up; the
// cache, which by then holds the messages sent after the removal (routed
// to the members who stay), must not serve them to it.
func TestARemovedMemberCatchingUpFromTheRecentCacheGetsNothingRoutedAfterTheRemoval(t *testing.T) {
	f := setup(t)
	held := &heldCursors{DeliveryStore: f.sessions, client: "u2", read: make(chan struct{}), answer: make(chan struct{})}
	h := startHub(t, held, delivery.Options{})
	obs := attachUser(t, h, f, "u1", 1, false, true, true)
	ctx := context.Background()
	if _, err := f.sessions.Open(ctx, "u2", "", 2, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	var owed []int64
	for range 3 {
		ev := sendAs(t, f, f.conv.ID, 1)
		h.Publish(ev) // into the recent cache
		owed = append(owed, ev.Seq)
	}
	waitSeqs(t, obs, f.conv.ID, 3)
	u2 := newConn("u2", true)
	u2.hub = h
	h.Attach(u2, "u2", 2, true, true, 0) // a persistent session coming back, behind by 3
	testkit.Receive(t, held.read, 10*time.Second, "the session never read its positions")
	if err := f.svc.RemoveMember(ctx, f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	h.Publish(chat.MemberRemovedEvent(f.conv.ID, 2, 1, owed[len(owed)-1]))
	got, err := f.sessions.SinceMany(ctx, 1, []chat.Range{{ConversationID: f.conv.ID, After: owed[len(owed)-1]}}, 1)
	if err != nil || len(got[f.conv.ID]) != 1 {
		t.Fatalf("read the removal's entry: %v, %v", got, err)
	}
	h.Publish(chat.EntryEvent(got[f.conv.ID][0])) // the removal's entry, for the members who stay
	after := sendAs(t, f, f.conv.ID, 1)           // user 2 is no longer a member
	h.Publish(after)
	waitSeqs(t, obs, f.conv.ID, 4) // all of it is in the cache
	close(held.answer)
	receivedOwedOnly(t, u2, f.conv.ID, owed, after.Seq)
}

// receivedOwedOnly waits until user 2 (u2) received the seqs owed of conv
// and checks they get nothing more, in particular not seq after, sent
// after their removal.
func receivedOwedOnly(t *testing.T, u2 *fakeConn, conv int64, owed []int64, after int64) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("user 2 to receive %v, sent while they were a member", owed),
		func() bool { return len(u2.seqs(conv)) >= len(owed) })
	testkit.Never(t, time.Second, fmt.Sprintf("user 2, removed, received message seq %d sent after the removal", after),
		func() bool { return slices.Contains(u2.seqs(conv), after) })
	if got := u2.seqs(conv); !slices.Equal(got, owed) {
		t.Fatalf("user 2 received %v, want exactly %v", got, owed)
	}
}

// removeAndTell removes user 2 from f.conv and tells h, as the store's
// commit does: member.removed at the last seq they are owed.
func removeAndTell(t *testing.T, h *delivery.Hub, f fixture) {
	t.Helper()
	h.Publish(removeEvent(t, f))
}

// removeEvent removes user 2 from f.conv and returns the member.removed
// the store publishes for it, unpublished.
func removeEvent(t *testing.T, f fixture) chat.Event {
	t.Helper()
	ctx := context.Background()
	if err := f.svc.RemoveMember(ctx, f.conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	var last int64
	if err := f.pool.QueryRow(ctx, "SELECT last_seq FROM conversation WHERE id=$1", f.conv.ID).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return chat.MemberRemovedEvent(f.conv.ID, 2, 1, last)
}

// awayAndBack removes user 2 (telling the hub), sends an entry while they
// are not a member, adds them back and sends n more: it returns the seq
// they are not owed and the n they are.
func awayAndBack(t *testing.T, h *delivery.Hub, f fixture, n int) (away, owed []int64) {
	t.Helper()
	removeAndTell(t, h, f)
	away = sendSeqs(t, h, f, 1)
	join(t, h, f, 2)
	return away, sendSeqs(t, h, f, n)
}

// ackAndWant has connected session u ("phone") acknowledge what it gets
// until the last of want arrives, then wants exactly want, in order, and
// none of away.
func ackAndWant(t *testing.T, h *delivery.Hub, f fixture, u *fakeConn, want, away []int64) {
	t.Helper()
	acked := map[uint16]bool{}
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("the message after the last re-add to reach the session (want %v)", want), func() bool {
		for _, p := range u.packets() {
			if p.QoS > 0 && !acked[p.PacketID] {
				acked[p.PacketID] = true
				h.Acked("phone", u, p.PacketID)
			}
		}
		return slices.Contains(u.seqs(f.conv.ID), want[len(want)-1])
	})
	testkit.Never(t, 300*time.Millisecond, fmt.Sprintf("more than %v", want),
		func() bool { return len(u.seqs(f.conv.ID)) > len(want) })
	if got := u.seqs(f.conv.ID); !slices.Equal(got, want) {
		t.Fatalf("got %v, want each membership's messages in order %v (not %v, sent while away)", got, want, away)
	}
}

// sendSeqs sends n messages as user 1 to f.conv and publishes them.
func sendSeqs(t *testing.T, h *delivery.Hub, f fixture, n int) []int64 {
	t.Helper()
	var seqs []int64
	for range n {
		ev := sendAs(t, f, f.conv.ID, 1)
		h.Publish(ev)
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}

// reconnectAndWant reattaches the persistent session "phone" and checks
// that it receives exactly want, in order.
func reconnectAndWant(t *testing.T, h *delivery.Hub, f fixture, want []int64, away []int64) {
	t.Helper()
	u := attach(t, h, f, "phone", true, true)
	waitSeqs(t, u, f.conv.ID, len(want))
	onlyEver(t, u, f, want, away, "after the reconnect")
}

// onlyEver checks that session u, which has received want, gets nothing
// more of f.conv for a while (away: what was sent while user 2 was not a
// member); when says after what, in the messages.
func onlyEver(t *testing.T, u *fakeConn, f fixture, want, away []int64, when string) {
	t.Helper()
	var got []int64
	testkit.Never(t, 300*time.Millisecond, fmt.Sprintf("more than %v %s (sent while user 2 was not a member: %v)", want, when, away),
		func() bool {
			got = u.seqs(f.conv.ID)
			return len(got) > len(want)
		})
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want every membership's unacknowledged entries once, in order %v (not %v, sent while user 2 was not a member)", when, got, want, away)
	}
}

// A persistent session offline while its user is removed, added back and
// removed again (and maybe added back once more) is owed the first
// membership's unacknowledged tail as well as the second membership and
// what follows the last join: the second removal must not overwrite what
// the first one recorded.
func TestAnOfflineSessionGetsEveryMembershipsUnacknowledgedEntriesAfterRemovalsAndReAdds(t *testing.T) {
	for _, addedBack := range []bool{false, true} {
		t.Run(fmt.Sprint("member at the end: ", addedBack), func(t *testing.T) {
			f := setup(t)
			h := newHub(t, f, delivery.Options{Window: 64, CursorFlush: 10 * time.Millisecond})
			u := attach(t, h, f, "phone", true, false) // acknowledges nothing
			want := sendSeqs(t, h, f, 3)
			waitSeqs(t, u, f.conv.ID, 3)
			h.Detach("phone", u)

			away, owed := awayAndBack(t, h, f, 2)
			want = append(want, owed...)
			removeAndTell(t, h, f)
			away = append(away, sendSeqs(t, h, f, 1)...)
			if addedBack {
				join(t, h, f, 2)
				want = append(want, sendSeqs(t, h, f, 1)...)
			}
			reconnectAndWant(t, h, f, want, away)
		})
	}
}

// awayWhileTheFanOutLags has persistent session "phone" of user 2 take
// three messages without acknowledging them and go away; then commits,
// without the hub routing any of it (a lagging fan-out), the user's
// removal, a message while they are away, their re-add and two messages.
// It returns those events unrouted, the seqs the session is owed and the
// one it is not.
func awayWhileTheFanOutLags(t *testing.T) (f fixture, h *delivery.Hub, late []chat.Event, want, away []int64) {
	t.Helper()
	f = setup(t)
	h = newHub(t, f, delivery.Options{Window: 64, CursorFlush: 10 * time.Millisecond})
	u := attach(t, h, f, "phone", true, false) // acknowledges nothing
	want = sendSeqs(t, h, f, 3)
	waitSeqs(t, u, f.conv.ID, 3)
	h.Detach("phone", u)
	late = []chat.Event{removeEvent(t, f), sendAs(t, f, f.conv.ID, 1)}
	away = []int64{late[1].Seq}
	late = append(late, joinEvents(t, f, 2)...)
	for range 2 {
		ev := sendAs(t, f, f.conv.ID, 1)
		late = append(late, ev)
		want = append(want, ev.Seq)
	}
	return f, h, late, want, away
}

// A fan-out that lags routes a removal and a re-add to a persistent
// session only after it reconnected and read its stored cursors, which
// already hold both: the session has queued what both memberships owe it,
// and the late events change nothing. Applied again, the leave would end
// the membership the stream follows now and the join after it would read
// back what was already sent.
func TestMembershipChangesRoutedAfterAReconnectReadThemDeliverNothingTwice(t *testing.T) {
	f, h, late, want, away := awayWhileTheFanOutLags(t)
	u := attach(t, h, f, "phone", true, false)
	waitSeqs(t, u, f.conv.ID, len(want))
	h.Publish(late...)
	onlyEver(t, u, f, want, away, "once the late events were routed")
}

// The same when the user is no longer a member at the reconnect and the
// session acknowledges everything owed before the late events come: the
// conversation's stream has ended, and the late join must not start a
// new one that its late leave then fills with what was acknowledged.
func TestMembershipChangesRoutedAfterALeftConversationWasAcknowledgedDeliverNothingAgain(t *testing.T) {
	f, h, late, want, away := awayWhileTheFanOutLags(t)
	late = append(late, removeEvent(t, f))
	u := attach(t, h, f, "phone", true, true)
	waitSeqs(t, u, f.conv.ID, len(want))
	testkit.WaitFor(t, 10*time.Second, "the session to acknowledge all it was owed of the group it left", func() bool {
		cs, err := f.sessions.Cursors(context.Background(), "phone", 2, true)
		return err == nil && !slices.ContainsFunc(cs, func(c chat.ConvCursor) bool { return c.ConversationID == f.conv.ID })
	})
	h.Publish(late...)
	onlyEver(t, u, f, want, away, "once the late events were routed")
}

// The same, for a session that was connected when its user was removed
// and added back, and went offline before the second removal: what it
// had not acknowledged of both memberships survives the reconnect.
func TestASessionThatWentOfflineBetweenAReAddAndTheNextRemovalGetsBothMembershipsUnacknowledgedEntries(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 64, CursorFlush: 10 * time.Millisecond})
	u := attach(t, h, f, "phone", true, false) // acknowledges nothing
	want := sendSeqs(t, h, f, 3)
	waitSeqs(t, u, f.conv.ID, 3)
	away, owed := awayAndBack(t, h, f, 2)
	want = append(want, owed...)
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("the message after the re-add (seq %d) to reach the connected session", want[len(want)-1]),
		func() bool { return slices.Contains(u.seqs(f.conv.ID), want[len(want)-1]) })
	h.Detach("phone", u)

	away2, owed := awayAndBack(t, h, f, 1)
	reconnectAndWant(t, h, f, append(want, owed...), append(away, away2...))
}

// A connected persistent session still finishing the first membership's
// tail (its window is full of it) when the user's second removal and a
// re-add are lost to a hub overflow: the resync reads from the stored
// cursor that the second membership ended too, and the session delivers
// both memberships, then what follows the last join.
func TestASessionFinishingATailThatMissedARemovalAndAReAddInAnOverflowGetsEveryMembership(t *testing.T) {
	f := setup(t)
	const bad = 987654321
	bh := &blockingHandler{prefix: "load members for fan-out failed", entered: make(chan struct{}), release: make(chan struct{})}
	h := startHub(t, &failMembers{DeliveryStore: f.sessions, conv: bad}, delivery.Options{HubQueue: 1, Window: 3, Logger: slog.New(bh)})
	u := attach(t, h, f, "phone", true, false) // acknowledges when the test says
	want := sendSeqs(t, h, f, 3)
	waitSeqs(t, u, f.conv.ID, 3) // the window is full

	away, owed := awayAndBack(t, h, f, 1)
	want = append(want, owed...)
	release := stallFanout(t, h, bh, bad)
	h.Publish(chat.Event{Type: chat.EventPresence}) // fills the queue of 1
	want = append(want, sendSeqs(t, h, f, 1)...)    // dropped: overflow
	removeAndTell(t, h, f)                          // dropped
	away = append(away, sendSeqs(t, h, f, 1)...)    // dropped
	join(t, h, f, 2)                                // dropped
	release()
	want = append(want, sendSeqs(t, h, f, 1)...)

	ackAndWant(t, h, f, u, want, away)
}
