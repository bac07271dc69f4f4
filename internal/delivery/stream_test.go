package delivery

import (
	"slices"
	"testing"
	"time"
)

// queuedSeqs lists the seqs of queued items.
func queuedSeqs(its []item) []int64 {
	var out []int64
	for _, it := range its {
		out = append(out, it.seq)
	}
	return out
}

func msg(seq int64) item { return item{kind: kMsg, conv: 1, seq: seq} }

// step is one thing that happens to a stream, and what must follow.
type step struct {
	do        func(st *stream, now time.Time) []item
	queued    []int64 // seqs handed to the client's queue by this step
	state     streamState
	next      int64
	until     int64 // checked when > 0
	verify    bool
	checkVeri bool
}

func offer(seq int64, room bool) func(*stream, time.Time) []item {
	return func(st *stream, now time.Time) []item { return st.offer(nil, msg(seq), room, now) }
}

func tickAfter(d time.Duration) func(*stream, time.Time) []item {
	return func(st *stream, now time.Time) []item { st.tick(now.Add(d), 50*time.Millisecond); return nil }
}

func leave(seq int64) func(*stream, time.Time) []item {
	return func(st *stream, _ time.Time) []item { st.leave(seq); return nil }
}

func fill(n int, complete, fromCache bool) func(*stream, time.Time) []item {
	return func(st *stream, _ time.Time) []item { return st.filled(n, complete, fromCache) }
}

// await is an event of the conversation waiting for the stream to reach
// seq (Session.admit).
func await(seq int64) func(*stream, time.Time) []item {
	return func(st *stream, now time.Time) []item { st.awaits(seq, now); return nil }
}

func TestStreamTransitions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func() *stream
		steps []step
	}{
		{"in-order live events go out as they come", func() *stream { return newStream(4, 4, false) }, []step{
			{do: offer(5, true), queued: []int64{5}, state: Live, next: 6},
			{do: offer(6, true), queued: []int64{6}, state: Live, next: 7},
			{do: offer(6, true), state: Live, next: 7}, // duplicate
			{do: offer(3, true), state: Live, next: 7}, // old duplicate
		}},
		{"a gap holds later events until the missing one arrives", func() *stream { return newStream(0, 0, false) }, []step{
			{do: offer(2, true), state: Gapped, next: 1},
			{do: offer(3, true), state: Gapped, next: 1},
			{do: offer(1, true), queued: []int64{1, 2, 3}, state: Live, next: 4},
		}},
		{"a gap that outlasts GapWait falls behind, knowing what committed", func() *stream { return newStream(0, 0, false) }, []step{
			{do: offer(3, true), state: Gapped, next: 1},
			{do: tickAfter(10 * time.Millisecond), state: Gapped, next: 1},
			{do: tickAfter(time.Second), state: Behind, next: 1, until: 3},
			{do: offer(4, true), state: Behind, next: 1, until: 4}, // dropped: catch-up brings it
		}},
		{"too many held events fall behind at once", func() *stream {
			st := newStream(0, 0, false)
			for seq := int64(2); seq < 2+maxHeld; seq++ {
				st.offer(nil, msg(seq), true, time.Now())
			}
			return st
		}, []step{
			{do: offer(2+maxHeld, true), state: Behind, next: 1, until: 1 + maxHeld + 1},
		}},
		{"no room for the next event falls behind", func() *stream { return newStream(0, 0, false) }, []step{
			{do: offer(1, false), state: Behind, next: 1, until: 1},
		}},
		{"a session resuming behind its conversation starts behind", func() *stream { return newStream(3, 9, false) }, []step{
			{do: offer(10, true), state: Behind, next: 4, until: 10},
		}},
		{"PostgreSQL ends catch-up when it returns fewer than asked", func() *stream { return newStream(3, 9, false) }, []step{
			{do: fill(6, false, false), state: Behind, next: 10},
			{do: fill(0, true, false), state: Live, next: 10},
			{do: offer(10, true), queued: []int64{10}, state: Live, next: 11},
		}},
		{"the recent cache ends catch-up only past what is known committed", func() *stream { return newStream(3, 9, false) }, []step{
			{do: fill(3, true, true), state: Behind, next: 7}, // cache complete, but 9 committed
			{do: fill(3, true, true), state: Live, next: 10},
		}},
		{"an awaited seq keeps the gap open past the live entries before it", func() *stream { return newStream(2, 2, false) }, []step{
			{do: await(5), state: Gapped, next: 3},
			{do: offer(3, true), queued: []int64{3}, state: Gapped, next: 4},
			{do: tickAfter(time.Second), state: Behind, next: 4},
			{do: fill(1, true, true), state: Behind, next: 5}, // the cache ends short of 5
			{do: fill(1, true, false), state: Live, next: 6},
		}},
		{"a live entry in order restarts the wait for an awaited seq past it", func() *stream { return newStream(2, 2, false) }, []step{
			{do: await(5), state: Gapped, next: 3},
			{do: func(st *stream, now time.Time) []item {
				return st.offer(nil, msg(3), true, now.Add(40*time.Millisecond))
			}, queued: []int64{3}, state: Gapped, next: 4},
			{do: tickAfter(80 * time.Millisecond), state: Gapped, next: 4}, // 40ms after the entry
			{do: tickAfter(100 * time.Millisecond), state: Behind, next: 4},
		}},
		{"an event awaited while behind keeps the recent cache from ending catch-up short of it", func() *stream { return newStream(3, 6, false) }, []step{
			{do: await(9), state: Behind, next: 4, until: 6},
			{do: fill(3, true, true), state: Behind, next: 7},
			{do: fill(0, true, false), state: Live, next: 7}, // PostgreSQL: nothing more is the user's
		}},
		{"a join starts behind and asks PostgreSQL first", func() *stream { return joinedStream(7) }, []step{
			{do: func(st *stream, _ time.Time) []item { return nil }, state: Behind, next: 8, verify: true, checkVeri: true},
			{do: fill(2, true, false), state: Live, next: 10, verify: false, checkVeri: true},
		}},
		{"a leave before what the user is owed was sent fetches it from PostgreSQL, then ends", func() *stream { return newStream(2, 2, false) }, []step{
			{do: offer(4, true), state: Gapped, next: 3},
			{do: leave(5), state: Behind, next: 3, until: 5, verify: true, checkVeri: true},
			{do: offer(6, true), state: Behind, next: 3, until: 5}, // after the leave: not theirs
			{do: fill(3, true, false), state: Live, next: 6},
		}},
		{"a leave after everything owed was queued ends at once", func() *stream { return newStream(2, 2, false) }, []step{
			{do: offer(3, true), queued: []int64{3}, state: Live, next: 4},
			{do: leave(3), state: Live, next: 4},
		}},
		{"resync after the hub dropped events checks PostgreSQL", func() *stream { return newStream(2, 2, false) }, []step{
			{do: offer(4, true), state: Gapped, next: 3},
			{do: func(st *stream, _ time.Time) []item { st.resync(6, true, false); return nil }, state: Behind, next: 3, until: 6, verify: true, checkVeri: true},
		}},
		{"resync with nothing new stays live", func() *stream { return newStream(2, 2, false) }, []step{
			{do: func(st *stream, _ time.Time) []item { st.resync(2, true, false); return nil }, state: Live, next: 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.start()
			now := time.Now()
			for i, s := range tc.steps {
				got := queuedSeqs(s.do(st, now))
				if !slices.Equal(got, s.queued) {
					t.Fatalf("step %d queued %v, want %v", i, got, s.queued)
				}
				if st.state != s.state || st.next != s.next {
					t.Fatalf("step %d: %s next %d, want %s next %d", i, st.state, st.next, s.state, s.next)
				}
				if s.until > 0 && st.until != s.until {
					t.Fatalf("step %d: until %d, want %d", i, st.until, s.until)
				}
				if s.checkVeri && st.verify != s.verify {
					t.Fatalf("step %d: verify %v, want %v", i, st.verify, s.verify)
				}
			}
		})
	}
}

func TestAStreamEndsOnceTheClientAcknowledgedWhatTheUserWasOwedBeforeLeaving(t *testing.T) {
	st := newStream(2, 2, false)
	if st.leave(2) != true {
		t.Fatal("a leave at a seq already acknowledged must end the stream at once")
	}
	st = newStream(2, 2, false)
	if st.leave(5) || st.state != Behind {
		t.Fatal("a leave at seq 5 with 3..5 not queued must not end the stream, and must fetch them")
	}
	st.filled(3, true, false)
	for _, seq := range []int64{3, 4, 5} {
		st.sent(seq)
	}
	st.acked(3)
	st.acked(5)
	if st.finished() {
		t.Fatal("finished while 4 is unacknowledged: its acknowledgement would not move the cursor")
	}
	if cursor, _ := st.acked(4); cursor != 5 || !st.finished() {
		t.Fatalf("cursor %d after 3..5 were acknowledged, finished %v", cursor, st.finished())
	}
	// Sent but unacknowledged when the leave arrives: the stream stays
	// for the acknowledgement, and is not behind.
	st = newStream(2, 2, false)
	st.filled(1, true, false)
	st.sent(3)
	if st.leave(3) || st.state == Behind {
		t.Fatalf("a leave at a seq sent but unacknowledged: state %v", st.state)
	}
	if st.acked(3); !st.finished() {
		t.Fatal("not finished once 3 was acknowledged")
	}
}

func TestStreamCursorIsTheHighestSeqWithEverythingBeforeItAcknowledged(t *testing.T) {
	st := newStream(10, 10, false)
	for _, seq := range []int64{11, 12, 13} {
		st.sent(seq)
	}
	for _, tc := range []struct {
		ack    int64
		cursor int64
		moved  bool
	}{
		{12, 10, false}, // 11 still out
		{11, 12, true},
		{99, 12, false}, // never sent
		{13, 13, true},
	} {
		cursor, moved := st.acked(tc.ack)
		if cursor != tc.cursor || moved != tc.moved {
			t.Fatalf("ack %d: cursor %d moved %v, want %d %v", tc.ack, cursor, moved, tc.cursor, tc.moved)
		}
	}
}

func TestAStreamRejoinedFinishesTheOldMembershipThenGoesOnAfterTheJoin(t *testing.T) {
	// Left at 5 with 3..5 not queued; joined again at 8.
	st := newStream(2, 5, false)
	st.leave(5)
	st.rejoined(8)
	if st.finished() || st.end != 5 {
		t.Fatalf("rejoined before the old membership's tail was queued: end %d, finished %v", st.end, st.finished())
	}
	if got := st.offer(nil, item{kind: kMsg, conv: 1, seq: 9}, true, time.Now()); len(got) != 0 {
		t.Fatalf("a live entry of the new membership jumped the old one's tail: %v", queuedSeqs(got))
	}
	st.filled(3, true, false) // 3..5 from PostgreSQL
	if st.end != 0 || st.next != 9 || st.state != Behind || !st.verify || st.until < 9 || st.floor != 8 {
		t.Fatalf("after the tail: end %d next %d state %v verify %v until %d floor %d; want a member's stream behind from 9 to 9",
			st.end, st.next, st.state, st.verify, st.until, st.floor)
	}
	for _, seq := range []int64{3, 4, 5} {
		st.sent(seq)
	}
	st.filled(1, true, false) // 9
	st.sent(9)
	for _, tc := range []struct{ ack, cursor int64 }{{3, 3}, {5, 3}, {4, 8}, {9, 9}} {
		if cursor, _ := st.acked(tc.ack); cursor != tc.cursor {
			t.Fatalf("ack %d: cursor %d, want %d (6..8 are not the user's)", tc.ack, cursor, tc.cursor)
		}
	}
}

func TestAStreamFinishingATailFollowsEachLaterMembershipInTurn(t *testing.T) {
	// 1..3 sent; left at 4, back at 5, left at 8, back at once (its join
	// at the leave's seq); 10 arrives live.
	st := newStream(0, 3, false)
	st.filled(3, true, false)
	for _, seq := range []int64{1, 2, 3} {
		st.sent(seq)
	}
	st.leave(4)
	st.rejoined(5)
	st.rejoined(5) // the same join, seen again: nothing changes
	st.leave(8)
	st.rejoined(8)
	st.offer(nil, item{kind: kMsg, conv: 1, seq: 10}, true, time.Now())
	if len(st.rejoins) != 2 || st.rejoins[0] != (membership{5, 8}) || st.rejoins[1] != (membership{8, 0}) {
		t.Fatalf("memberships after the tail: %v, want [{5 8} {8 0}]", st.rejoins)
	}
	st.filled(1, true, false) // 4, the first membership's end
	if st.end != 8 || st.next != 6 || st.floor != 5 || st.state != Behind || st.finished() {
		t.Fatalf("after the first tail: end %d next %d floor %d state %v; want the second membership, behind from 6 to its end 8",
			st.end, st.next, st.floor, st.state)
	}
	st.filled(3, true, false) // 6..8
	if st.end != 0 || st.next != 9 || st.floor != 8 || st.state != Behind || st.until < 10 {
		t.Fatalf("after the second tail: end %d next %d floor %d state %v until %d; want a member's stream behind from 9 to 10",
			st.end, st.next, st.floor, st.state, st.until)
	}
}

func TestAStreamFollowsTheMembershipsAStoredCursorSaysItIsOwed(t *testing.T) {
	// Left at 5, back at 7, left at 9, back at 11; the conversation is at 12.
	owed := []membership{{2, 5}, {7, 9}, {11, 0}}
	for _, tc := range []struct {
		name    string
		st      func() *stream
		end     int64
		rejoins []membership
	}{
		{"a reconnect: the cursor is in the first membership", func() *stream { return newStream(2, 12, false) },
			5, []membership{{7, 9}, {11, 0}}},
		{"ending, knowing the second join only", func() *stream {
			st := newStream(2, 12, false)
			st.leave(5)
			st.rejoined(7)
			return st
		}, 5, []membership{{7, 9}, {11, 0}}},
		{"in the second membership, its leave missed", func() *stream {
			st := newStream(2, 12, false)
			st.leave(5)
			st.rejoined(7)
			st.filled(3, true, false) // 3..5, then on after 7
			st.filled(1, true, false) // 8
			return st
		}, 9, []membership{{11, 0}}},
		{"in the membership that lasts", func() *stream { return newStream(11, 12, false) }, 0, nil},
	} {
		st := tc.st()
		st.follow(owed)
		if st.end != tc.end || !slices.Equal(st.rejoins, tc.rejoins) {
			t.Errorf("%s: end %d, rejoins %v; want %d, %v", tc.name, st.end, st.rejoins, tc.end, tc.rejoins)
		}
	}

	// A known membership whose leave is not on record (nothing was
	// committed while it lasted) is passed over for the next one.
	st := newStream(2, 12, false)
	st.leave(5)
	st.rejoined(7)
	st.follow([]membership{{2, 5}, {9, 0}})
	if want := []membership{{7, 7}, {9, 0}}; st.end != 5 || !slices.Equal(st.rejoins, want) {
		t.Fatalf("end %d, rejoins %v; want 5, %v", st.end, st.rejoins, want)
	}
	st.filled(3, true, false) // 3..5
	if st.end != 0 || st.next != 10 || st.floor != 9 || len(st.rejoins) != 0 {
		t.Fatalf("after the tail: end %d next %d floor %d rejoins %v; want a member's stream from 10", st.end, st.next, st.floor, st.rejoins)
	}
}

// A fresh stream (a clean session's, started at last_seq as read after
// the connect) starts over before an entry routed to it late, while it
// has queued nothing; once it moved on, or for a stored cursor's stream,
// an entry at or before its position is a duplicate.
func TestAFreshStreamStartsOverBeforeALateEntryUntilItMovesOn(t *testing.T) {
	st := newStream(10, 10, false)
	st.fresh = true
	st.floor = 3
	if _, ok := st.rewound(3); ok {
		t.Fatal("rewound to an entry at the floor")
	}
	r, ok := st.rewound(8)
	if !ok || r.next != 8 || r.state != Behind || r.until != 10 || r.floor != 3 || !r.fresh {
		t.Fatalf("rewound to 8: %v %+v", ok, r)
	}
	// Another node's earlier entry, before the catch-up queued anything.
	if r2, ok := r.rewound(6); !ok || r2.next != 6 || r2.until != 10 {
		t.Fatalf("rewound again to 6: %v %+v", ok, r2)
	}
	moved := newStream(10, 10, false)
	moved.fresh = true
	if got := queuedSeqs(moved.offer(nil, msg(11), true, time.Now())); !slices.Equal(got, []int64{11}) {
		t.Fatalf("queued %v", got)
	}
	if _, ok := moved.rewound(9); ok {
		t.Fatal("a stream that queued 11 started over before 9")
	}
	sent := newStream(10, 10, false)
	sent.fresh = true
	sent.offer(nil, msg(11), true, time.Now())
	sent.sent(11)
	sent.acked(11)
	if _, ok := sent.rewound(9); ok {
		t.Fatal("a stream that sent 11, acknowledged, started over before 9")
	}
	stored := newStream(10, 10, false)
	if _, ok := stored.rewound(9); ok {
		t.Fatal("a stored cursor's stream started over")
	}
}

// An event at or before a fresh stream's start waits for an entry that
// may still start it over (has): as for a gap, GapWait, or until the
// stream moved on or caught up from PostgreSQL; at or before its floor,
// or on a stored cursor's stream, it does not.
func TestAnEventAtOrBeforeAFreshStreamsStartWaitsUntilNoLateEntryCanComeBeforeIt(t *testing.T) {
	fresh := func() *stream {
		st := newStream(10, 10, false)
		st.fresh, st.floor = true, 3
		return st
	}
	st := fresh()
	if st.has(10) || !st.has(3) || st.has(11) {
		t.Fatalf("a fresh stream has 10 %v, 3 %v, 11 %v; want false, true, false", st.has(10), st.has(3), st.has(11))
	}
	now := time.Now()
	if !st.awaits(10, now) || st.state != Gapped {
		t.Fatalf("awaiting 10: state %v, want gapped", st.state)
	}
	if st.tick(now.Add(time.Second), time.Second) || !st.tick(now.Add(2*time.Second), time.Second) || !st.has(10) {
		t.Fatalf("after the gap wait: has 10 %v, want true", st.has(10))
	}
	moved := fresh()
	moved.awaits(10, now)
	moved.offer(nil, msg(11), true, now)
	if !moved.has(10) || moved.state != Live {
		t.Fatalf("after queuing 11: has 10 %v, state %v; want true, live", moved.has(10), moved.state)
	}
	caught := fresh()
	caught.fallBehind(12)
	caught.filled(0, true, false)
	if !caught.has(10) {
		t.Fatal("a fresh stream that caught up from PostgreSQL still waits for 10")
	}
	if stored := newStream(10, 10, false); !stored.has(10) {
		t.Fatal("a stored cursor's stream waits for 10")
	}
}
