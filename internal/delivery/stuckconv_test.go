package delivery_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// stuckConv is user 3's session on a node that never hears of their
// removal from conv (another node removed them, the relay is down), in a
// hub whose catch-up reads are counted, and other and third, groups of
// users 1, 2 and 3 they stay in.
type stuckConv struct {
	st      *store.Store
	rec     *recorder
	h       *delivery.Hub
	counted *countedSince
	u3      *fakeConn
	conv    int64
	other   int64
	third   int64
	read    int64 // the seq user 2 read up to in conv
	removal []chat.Event
	// presences counts the presence events routed to user 3.
	presences int
}

// newStuckConv sends n messages to conv before the removal, all delivered,
// so that user 2 has n receipts left to commit after it; beforeRemoval
// runs just before the removal commits.
func newStuckConv(t *testing.T, o delivery.Options, n int, beforeRemoval ...func(*stuckConv)) *stuckConv {
	t.Helper()
	return newStuckConvOf(t, false, o, n, beforeRemoval...)
}

// newStuckConvOf is newStuckConv with user 3's session persistent or not.
func newStuckConvOf(t *testing.T, persistent bool, o delivery.Options, n int, beforeRemoval ...func(*stuckConv)) *stuckConv {
	t.Helper()
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	other, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "other", Members: []int64{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	third, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "third", Members: []int64{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	rec.take()
	s := &stuckConv{st: st, rec: rec, counted: &countedSince{DeliveryStore: f.sessions}, conv: conv.ID, other: other.ID, third: third.ID}
	s.h = startHub(t, s.counted, o)
	s.u3 = attachUser(t, s.h, f, "u3", 3, persistent, true, true)
	for _, ev := range append(sendSeqsAs(t, st, rec, conv.ID, 1, n), sendSeqsAs(t, st, rec, other.ID, 1, 1)...) {
		s.h.Deliver(ev)
	}
	waitSeqs(t, s.u3, conv.ID, n)
	waitSeqs(t, s.u3, other.ID, 1)
	for _, f := range beforeRemoval {
		f(s)
	}
	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	s.removal = rec.take() // not relayed, unless a test says
	return s
}

// receipt commits user 2's read of the next message of conv, after the
// removal, and routes it here at once.
func (s *stuckConv) receipt(t *testing.T) {
	t.Helper()
	s.read++
	if _, err := s.st.MarkRead(context.Background(), s.conv, 2, s.read); err != nil {
		t.Fatal(err)
	}
	s.routeOneByOne(t, s.rec.take())
}

// routeOneByOne hands evs to the hub, each followed by a presence event
// it waits for: the session took the event before it.
func (s *stuckConv) routeOneByOne(t *testing.T, evs []chat.Event) {
	t.Helper()
	for _, ev := range evs {
		s.h.Deliver(ev)
		s.presence(t)
	}
}

// presence routes a presence event to user 3 and waits for it: the
// session took what came before it.
func (s *stuckConv) presence(t *testing.T) {
	t.Helper()
	online := true
	s.h.Deliver(chat.Event{Type: chat.EventPresence, UserID: 1, Online: &online, To: []int64{3}})
	s.presences++
	testkit.WaitFor(t, 5*time.Second, "the presence after the event", func() bool {
		return events(s.u3, chat.EventPresence, 0) == s.presences
	})
}

// resynced makes user 3's session re-read its positions from PostgreSQL,
// as after an overflow of the fan-out's queue, and waits until it did.
func (s *stuckConv) resynced(t *testing.T) {
	t.Helper()
	before := s.counted.cursors.Load()
	s.h.Resync()
	testkit.WaitFor(t, 5*time.Second, "the session's resync", func() bool { return s.counted.cursors.Load() > before })
	s.presence(t) // routed after the read began: taken once it is applied
}

// typing routes user 1 typing in conv to user 3 and waits for it: after a
// resync emptied the fan-out's member index, that reloads it.
func (s *stuckConv) typing(t *testing.T) {
	t.Helper()
	typing := events(s.u3, chat.EventTyping, s.conv)
	s.h.Deliver(chat.Event{Type: chat.EventTyping, ConversationID: s.conv, UserID: 1})
	testkit.WaitFor(t, 5*time.Second, "user 1 typing, routed to user 3", func() bool {
		return events(s.u3, chat.EventTyping, s.conv) > typing
	})
}

// A removed member's conversation whose removal the relay does not bring
// holds the read receipts committed after it waiting in their session
// for good. They must not take the room of another conversation's
// receipt, which waits for an entry that is on its way: past QueueSize
// waiting events, that one is still kept, and goes out when its entry
// comes.
func TestAConversationStuckBeforeARemovalLeavesRoomForAnotherConversationsWaitingReceipt(t *testing.T) {
	const qs = 4
	s := newStuckConv(t, delivery.Options{GapWait: time.Hour, QueueSize: qs}, qs+1)
	for range qs + 1 {
		s.receipt(t)
	}
	entry := sendSeqsAs(t, s.st, s.rec, s.other, 1, 1)
	if _, err := s.st.MarkRead(context.Background(), s.other, 2, entry[0].Seq); err != nil {
		t.Fatal(err)
	}
	s.routeOneByOne(t, append(s.rec.take(), entry...)) // the receipt first, then the entry it waits for
	testkit.WaitFor(t, 5*time.Second, "the other conversation's receipt", func() bool {
		return events(s.u3, chat.EventReadUpdated, s.other) == 1
	})
	if n := events(s.u3, chat.EventReadUpdated, s.conv); n != 0 {
		t.Errorf("the removed member got %d read receipts committed after their removal", n)
	}
}

// The receipts that wait for good in a removed member's conversation
// whose removal the relay does not bring each make the stream wait for
// their entries and then ask PostgreSQL: at most one read per receipt,
// and receipts that come within one GapWait share it; a session left
// alone reads no more.
func TestAConversationStuckBeforeARemovalCostsAtMostOneCatchUpReadPerGapWait(t *testing.T) {
	const gapWait = 200 * time.Millisecond
	s := newStuckConv(t, delivery.Options{GapWait: gapWait}, 25)
	before := s.counted.n.Load()
	start := time.Now()
	for range 20 {
		s.receipt(t)
	}
	took := time.Since(start)
	time.Sleep(3 * gapWait) // the last gap's wait and read
	reads, most := s.counted.n.Load()-before, int64(took/gapWait)+2
	if reads > most {
		t.Errorf("20 receipts in %v cost %d catch-up reads, want at most %d (one per GapWait %v)", took, reads, most, gapWait)
	}
	before = s.counted.n.Load()
	testkit.Never(t, 5*gapWait, "a catch-up read with no new receipt", func() bool { return s.counted.n.Load() > before })
	for range 5 {
		before = s.counted.n.Load()
		s.receipt(t)
		testkit.WaitFor(t, 5*time.Second, "the receipt's catch-up read", func() bool { return s.counted.n.Load() > before })
		testkit.Never(t, 2*gapWait, "a second catch-up read for one receipt", func() bool { return s.counted.n.Load() > before+1 })
	}
	t.Logf("20 receipts in %v: %d reads", took, reads)
}

// heldReceipts commits an entry of user 3 in conv, held back as a late
// relay holds it, and each reader's read of it, routed here at once:
// their receipts wait for the entry. It returns the entry's events.
func (s *stuckConv) heldReceipts(t *testing.T, conv int64, readers ...int64) []chat.Event {
	t.Helper()
	entry := sendSeqsAs(t, s.st, s.rec, conv, 3, 1)
	for _, u := range readers {
		if _, err := s.st.MarkRead(context.Background(), conv, u, entry[0].Seq); err != nil {
			t.Fatal(err)
		}
		s.routeOneByOne(t, s.rec.take())
	}
	return entry
}

// Past QueueSize, of the conversations with the most events waiting, the
// one whose event has waited longest gives it up for another
// conversation's: a conversation stuck before a removal, whose receipts
// came first, gives its own, not one of a conversation as full whose
// entry is on its way (two readers' receipts, each a read state the
// client must hear).
func TestAReceiptPastQueueSizeTakesThePlaceOfTheLongestWaitingOfTheFullestConversations(t *testing.T) {
	const qs = 4
	s := newStuckConv(t, delivery.Options{GapWait: time.Hour, QueueSize: qs}, 2)
	s.receipt(t)
	s.receipt(t)
	late := s.heldReceipts(t, s.other, 1, 2)              // as many waiting as the stuck conversation
	late = append(late, s.heldReceipts(t, s.third, 1)...) // past QueueSize
	s.routeOneByOne(t, late)
	testkit.WaitFor(t, 5*time.Second, "both readers' receipts of the other conversation and the third's", func() bool {
		return events(s.u3, chat.EventReadUpdated, s.other) == 2 && events(s.u3, chat.EventReadUpdated, s.third) == 1
	})
	if n := events(s.u3, chat.EventReadUpdated, s.conv); n != 0 {
		t.Errorf("the removed member got %d read receipts committed after their removal", n)
	}
}

// The relay bringing the removal at last frees the room the stuck
// conversation's receipts took: the removed user hears member.removed (a
// notice: it never waits with them), none of those receipts, and as many
// receipts of another conversation as QueueSize then wait for their
// entries and go out.
func TestARemovalRelayedAtLastFreesTheRoomOfTheStuckConversationsReceipts(t *testing.T) {
	testRemovalRelayedAtLast(t)
}

// The session's positions re-read just before the removal (a resync,
// after an overflow) are no word on it, though the conversation's
// last_seq they read is the removal's seq: member.removed carries the last
// seq the removed member is owed, and the system entry that commits with
// it comes after. Relayed at last, the removal still ends the removed
// member's stream and frees the room.
func TestARemovalCommittedJustAfterAResyncStillEndsTheRemovedMembersStream(t *testing.T) {
	testRemovalRelayedAtLast(t, func(s *stuckConv) {
		s.resynced(t)
		s.typing(t) // the index lists user 3 again before the removal
	})
}

func testRemovalRelayedAtLast(t *testing.T, beforeRemoval ...func(*stuckConv)) {
	const qs = 4
	s := newStuckConv(t, delivery.Options{GapWait: time.Hour, QueueSize: qs}, qs, beforeRemoval...)
	for range qs {
		s.receipt(t)
	}
	s.routeOneByOne(t, s.removal)
	testkit.WaitFor(t, 5*time.Second, "the removed user's member.removed", func() bool {
		return events(s.u3, chat.EventMemberRemoved, s.conv) == 1
	})
	late := s.heldReceipts(t, s.other, 1, 2)
	late = append(late, s.heldReceipts(t, s.other, 1, 2)...)
	s.routeOneByOne(t, late)
	testkit.WaitFor(t, 5*time.Second, "the other conversation's four receipts", func() bool {
		return events(s.u3, chat.EventReadUpdated, s.other) == qs
	})
	if n := events(s.u3, chat.EventReadUpdated, s.conv); n != 0 {
		t.Errorf("the removed member got %d read receipts committed after their removal", n)
	}
}

// A member re-added just after their session re-read its positions (a
// resync) while it still delivered what their removal left them owed:
// the last_seq it read, the removal's entry, is no word on a join at that
// seq, which commits with its own entry after. The join starts the
// stream's next membership at once: the entries after it go out without
// the session asking PostgreSQL again whom they are for (a stray).
func TestAJoinCommittedJustAfterAResyncStartsTheStreamAtOnce(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	counted := &countedSince{DeliveryStore: f.sessions}
	h := startHub(t, counted, delivery.Options{})
	s := &stuckConv{st: st, rec: rec, h: h, counted: counted, conv: conv.ID,
		u3: attachUser(t, h, f, "u3", 3, true, false, true)} // acknowledges when told
	s.routeOneByOne(t, sendSeqsAs(t, st, rec, conv.ID, 1, 1))
	owed := s.u3.packets()[0].PacketID // unacknowledged: the removal leaves it owed
	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	s.routeOneByOne(t, rec.take())
	s.resynced(t)
	if _, _, err := st.AddMember(ctx, conv.ID, 1, 3, chat.RoleMember); err != nil {
		t.Fatal(err)
	}
	rejoin := rec.take()
	s.routeOneByOne(t, rejoin[:1]) // member.added
	h.Acked("u3", s.u3, owed)
	read := counted.cursors.Load()
	s.routeOneByOne(t, append(rejoin[1:], sendSeqsAs(t, st, rec, conv.ID, 1, 1)...))
	last := rejoin[0].Seq + 2 // the join's entry, then the message
	testkit.WaitFor(t, 5*time.Second, "the entries after the join", func() bool {
		seqs := s.u3.seqs(conv.ID)
		return len(seqs) > 0 && seqs[len(seqs)-1] == last
	})
	if n := counted.cursors.Load() - read; n != 0 {
		t.Errorf("the session re-read its positions %d times for the entries after the join", n)
	}
}

// A session whose user was removed and added back elsewhere (the relay
// brings neither) learns of it at a resync: a clean session starts the
// stream over at the join, a persistent one finishes what the removal
// left it owed (its stored cursor says so) and goes on after the join. The
// read receipts that waited on the old membership, committed while the
// user was away (at the join's seq, too: the join commits with its entry
// one past it), are not theirs, and are dropped.
func TestReceiptsWaitingFromWhileAMemberWasAwayAreDroppedWhenAResyncFindsThemAddedBack(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "persistent"}[persistent], func(t *testing.T) {
			// No cursor flush: the stored one still owes the entry before the removal.
			s := newStuckConvOf(t, persistent, delivery.Options{GapWait: time.Hour, CursorFlush: time.Hour}, 1)
			s.receipt(t) // at the removal's entry, waiting
			if _, _, err := s.st.AddMember(context.Background(), s.conv, 1, 3, chat.RoleMember); err != nil {
				t.Fatal(err)
			}
			rejoin := s.rec.take() // not relayed yet
			s.resynced(t)
			s.routeOneByOne(t, append(rejoin, sendSeqsAs(t, s.st, s.rec, s.conv, 1, 1)...))
			last := rejoin[0].Seq + 2 // the join's entry, then the message
			testkit.WaitFor(t, 5*time.Second, "the message after the re-add", func() bool {
				seqs := s.u3.seqs(s.conv)
				return seqs[len(seqs)-1] == last
			})
			if n := events(s.u3, chat.EventReadUpdated, s.conv); n != 0 {
				t.Errorf("the member added back got %d read receipts committed while they were away", n)
			}
		})
	}
}
