package delivery

import "time"

// streamState is where one conversation's stream stands for one session.
type streamState uint8

const (
	// Live: every seq below next went to the client's queue; the next
	// live event with seq == next goes out at once.
	Live streamState = iota
	// Gapped: live, but events past a missing seq arrived; they are held
	// until the missing one comes or the gap times out (then Behind).
	Gapped
	// Behind: PostgreSQL (or the recent cache) may hold seqs >= next that
	// the session has not queued; live events are dropped until catch-up
	// reaches the newest seq known to be committed.
	Behind
)

func (s streamState) String() string {
	switch s {
	case Live:
		return "live"
	case Gapped:
		return "gapped"
	case Behind:
		return "behind"
	}
	return "?"
}

// maxHeld bounds the out-of-order events a Gapped stream holds before it
// gives up waiting and falls Behind.
const maxHeld = 256

// stream is one conversation's delivery state for one session: which seq
// the client gets next, what is held, what catch-up must fetch, and what
// the client acknowledged (the delivered cursor). It is a pure value:
// methods decide, the session pump does the I/O they call for. One pump
// owns each stream.
type stream struct {
	state streamState
	next  int64 // next seq to hand to the client
	// until is, while Behind, the newest seq known to be committed: the
	// recent cache may end catch-up only past it (PostgreSQL always may),
	// and serves nothing while it is past what the fan-out saw.
	until int64
	// awaited is the newest seq an event of the conversation waits for
	// (awaits): neither a live entry nor the recent cache ends the wait
	// short of it; the gap wait, then PostgreSQL, do. Unlike until, it
	// lets the cache serve nothing: the event may have come by a stale
	// member index, past a removal the session has not heard of.
	awaited int64
	// verify: catch up from PostgreSQL, not the recent cache (events may
	// have been dropped before the cache saw them).
	verify   bool
	held     map[int64]item // Gapped: out-of-order live events by seq
	gapSince time.Time
	large    bool // more members than LargeGroup: message.new without body
	// floor bounds the user's history floor from above: their join_seq,
	// which is their floor if the group's history is or becomes "joined".
	// The recent cache serves the stream no edit of a message at or
	// before it (recent.get); PostgreSQL, which knows the floor, does.
	floor int64

	unacked  []int64 // sent, not yet acknowledged, ascending
	sentHigh int64   // highest seq sent
	saved    int64   // last cursor handed to the writer

	// fresh: a stream of a session without stored cursors that has sent
	// nothing yet. It starts at the conversation's last_seq as read after
	// its client connected; an entry routed to it late (rewound) is in
	// that last_seq although its client may have been connected when it
	// committed.
	fresh bool
	// settled: the stream waited GapWait for entries an event needed
	// (awaits) and none came in order, or caught up from PostgreSQL
	// (then no gap timer runs): an entry at or before its start routed
	// late (early) no longer holds back the events of its conversation,
	// though it is still delivered.
	settled bool

	// end, once the user left the conversation, is the last seq they are
	// owed (0: a member). The stream catches up to it from PostgreSQL and
	// then ends: whatever was committed while they were a member reaches
	// them, even when the fan-out no longer routed it to them.
	end int64
	// read is the conversation's last_seq as of the stored cursors the
	// stream was built or brought up to date from (0: none, a stream
	// started by a join): they hold every join and leave up to it
	// (Session.noteRead).
	read int64

	// rejoins, on a stream that is ending, are the memberships that
	// followed, oldest first: once the stream has queued everything up to
	// end, it goes on after the first one's join as a member's stream
	// (resume): what the old membership owed comes first, nothing from
	// while they were away. A membership's end is 0 while it lasts.
	rejoins []membership
}

// slim reports whether the stream's entries go out without their content
// (chat.Event.Slim): a member's in a group over LargeGroup, who reads the
// rest through history. What a membership that ended still owes goes out
// whole: history refuses a user who is no longer a member, and the event
// is all they get of an entry that was theirs. The one rule of both
// catch-up sources and of a leave's queued entries (Session.accept).
func (st *stream) slim() bool { return st.large && st.end == 0 }

// unqueue takes back the entries from seq on that the stream queued and
// the session did not send: it reads them again.
func (st *stream) unqueue(seq int64) {
	if seq < st.next {
		st.next = seq
	}
}

// membership is a span of the conversation that is the user's: what
// follows join, up to end once they left (0: they are a member).
type membership struct{ join, end int64 }

// newStream starts where a session's cursor stands: delivered is the
// highest seq the client acknowledged, lastSeq the conversation's newest.
func newStream(delivered, lastSeq int64, large bool) *stream {
	st := &stream{next: delivered + 1, saved: delivered, sentHigh: delivered, large: large}
	if lastSeq > delivered {
		st.state, st.until = Behind, lastSeq
	}
	return st
}

// rewound is the stream a fresh one starts over as when an entry at or
// before its start is routed to it (seq), before it queued anything: the
// entry committed before the session read its start, and the fan-out
// routes it only now (the relay brings it from another node, or the
// members of its conversation were still loading). Its client was
// connected when it committed, or it committed just before: it is
// delivered, and what followed it up to the start is caught up in order.
// A conversation's entries reach the fan-out in seq order from each
// node, so such an entry comes before the stream moved on, except when
// another node's later entry came first; then it is not delivered.
func (st *stream) rewound(seq int64) (*stream, bool) {
	if !st.early(seq) {
		return nil, false
	}
	r := newStream(seq-1, max(st.until, st.saved, st.heldHigh()), st.large)
	r.floor, r.fresh, r.awaited, r.settled = st.floor, true, st.awaited, st.settled
	return r, true
}

// early reports whether an entry at seq, at or before the stream's start,
// would start it over if routed to it now (rewound): the stream is fresh,
// has sent nothing and follows the membership that lasts, and seq is past
// its floor.
func (st *stream) early(seq int64) bool {
	untouched := st.next == st.saved+1 && st.sentHigh == st.saved && len(st.unacked) == 0
	return st.fresh && untouched && st.end == 0 && len(st.rejoins) == 0 && seq > st.floor && seq <= st.saved
}

// has reports whether the stream has every entry up to seq, as an event of
// its conversation at seq needs to go out (Session.admit): it queued them,
// and no entry at or before seq may still start it over (early), unless it
// waited GapWait for one (settled). A receipt of an entry relayed late to
// a fresh stream waits for the entry as for a gap.
func (st *stream) has(seq int64) bool {
	return st.next > seq && (st.settled || !st.early(seq))
}

// joinedStream starts a conversation the user joined at seq while the
// session runs: nothing before it is due, and PostgreSQL is asked once in
// case a message was routed before the join reached the session.
func joinedStream(seq int64) *stream {
	return &stream{state: Behind, verify: true, next: seq + 1, saved: seq, sentHigh: seq, floor: seq}
}

// leave ends the stream at seq, the last seq the user is owed in a
// conversation they left; it reports whether the client acknowledged all
// of it already (the stream can go at once). Otherwise the stream stays
// until it did, so that the acknowledgements still move the session's
// cursor (a persistent session that reconnects resumes from it), and if it
// has not queued up to seq it falls Behind and catch-up fetches the rest
// from PostgreSQL (never the recent cache, which may hold later entries).
func (st *stream) leave(seq int64) (done bool) {
	if n := len(st.rejoins); n > 0 {
		st.rejoins[n-1].end = seq // the end of the newest membership
		return false
	}
	return st.endAt(seq)
}

// endAt ends the membership the stream follows now at seq.
func (st *stream) endAt(seq int64) (done bool) {
	if seq == 0 {
		// Left before the group's first entry: nothing is owed (and an
		// end of 0 would read as a member).
		return true
	}
	st.end = seq
	if st.next > seq {
		st.state, st.held, st.gapSince = Live, nil, time.Time{} // nothing of it is held
		return st.finished()
	}
	st.fallBehind(seq)
	st.verify = true
	return false
}

// finished reports whether a stream that is ending had all it owed
// acknowledged.
func (st *stream) finished() bool {
	return st.end > 0 && len(st.rejoins) == 0 && st.saved >= st.end
}

// rejoined records that the user joined again at seq while the stream was
// still finishing what a previous membership owed: that comes first, then
// what follows seq. A join the stream knows of already (the user has not
// left the newest membership it holds) changes nothing.
func (st *stream) rejoined(seq int64) {
	// A join may come at the seq of the leave before it (nothing was
	// committed between them), never before it.
	if n := len(st.rejoins); st.end == 0 || seq < st.end || n > 0 && (st.rejoins[n-1].end == 0 || seq < st.rejoins[n-1].end) {
		return
	}
	st.rejoins = append(st.rejoins, membership{join: seq})
	st.resume()
}

// rejoining reports whether the user joined again after the membership
// the stream follows now ended.
func (st *stream) rejoining() bool { return len(st.rejoins) > 0 }

// follow brings the stream up to ms, the memberships a stored cursor
// says the session is owed, oldest first (end 0: the one that lasts): the
// session missed some of their leaves and joins (it was offline, or they
// were lost to an overflow). A stream that has not seen its membership
// end follows the newest of ms that began before its next seq, and ends
// where that one ended; the memberships after the stream's own that it
// does not know yet come after it, in order (learn).
func (st *stream) follow(ms []membership) {
	if st.end == 0 {
		i := 0
		for i+1 < len(ms) && ms[i+1].join < st.next {
			i++
		}
		if ms[i].end == 0 {
			return // the stream follows the membership that lasts
		}
		st.endAt(ms[i].end)
		ms = ms[i+1:]
	}
	for _, m := range ms {
		st.learn(m)
	}
}

// learn adds m, a membership of the user's, to those the stream goes on
// with, unless it knows it already (the one it follows ends at end, after
// its join; those in rejoins by their joins): then it only learns that m
// ended, if it did not know.
func (st *stream) learn(m membership) {
	n := len(st.rejoins)
	switch {
	case m.join < st.end || n > 0 && m.join < st.rejoins[n-1].join:
		return // known, and not the newest
	case n > 0 && m.join == st.rejoins[n-1].join:
		if st.rejoins[n-1].end > 0 {
			return
		}
	default:
		if n > 0 && st.rejoins[n-1].end == 0 {
			// Its leave is not on record: nothing was committed while
			// it lasted.
			st.rejoins[n-1].end = st.rejoins[n-1].join
		}
		st.rejoined(m.join)
	}
	if m.end > 0 {
		st.leave(m.end)
	}
}

// resume turns a stream that is ending and rejoined into the next
// membership's once everything up to end is queued: it continues after
// the join from PostgreSQL, as a joined stream starts. The cursor may
// skip to the join: nothing in between is the user's. A membership with
// nothing owed in it is passed over at once.
func (st *stream) resume() {
	for len(st.rejoins) > 0 && st.end > 0 && st.next > st.end {
		m := st.rejoins[0]
		st.rejoins = st.rejoins[1:]
		if len(st.rejoins) == 0 {
			st.rejoins = nil
		}
		st.next, st.floor, st.sentHigh = m.join+1, m.join, max(st.sentHigh, m.join)
		st.end = 0
		st.fallBehind(0)
		st.verify = true
		if m.end > 0 {
			st.endAt(m.end)
		}
	}
}

// offer decides a live event. room says the session can queue it now (it
// is subscribed and its queue has space). It appends the events to queue
// for the client to dst, in order: this one and any held ones it
// releases (the session's queue itself: no slice per event).
func (st *stream) offer(dst []item, it item, room bool, now time.Time) []item {
	switch {
	case it.seq < st.next:
		return dst // a duplicate
	case st.end > 0 && it.seq > st.end:
		if st.rejoining() && it.seq > st.rejoins[0].join {
			// Theirs again: read back once the old membership's tail is
			// queued (resume).
			st.until = max(st.until, it.seq)
		}
		return dst // after the user left
	case st.state == Behind:
		st.until = max(st.until, it.seq) // catch-up will return it in order
		return dst
	case it.seq == st.next:
		if !room {
			st.fallBehind(it.seq)
			return dst
		}
		st.next++
		dst = st.release(append(dst, it))
		if st.state == Gapped && len(st.held) == 0 {
			// Only an awaited seq keeps the gap open, and the entries
			// before it are coming: its wait starts again. Entries that
			// keep coming in order are waited for as they come (a busy
			// group's receipts run ahead of the relay); GapWait after
			// they stop, PostgreSQL fills the rest.
			st.gapSince = now
		}
		st.resume()
		return dst
	}
	if len(st.held) >= maxHeld {
		st.fallBehind(max(it.seq, st.heldHigh()))
		return dst
	}
	if st.held == nil {
		st.held = map[int64]item{}
	}
	st.held[it.seq] = it
	if st.state == Live {
		st.state, st.gapSince = Gapped, now
	}
	return dst
}

// release appends the held events that follow next to out, in order.
func (st *stream) release(out []item) []item {
	for len(st.held) > 0 {
		it, ok := st.held[st.next]
		if !ok {
			break
		}
		delete(st.held, st.next)
		out = append(out, it)
		st.next++
	}
	for seq := range st.held {
		if seq < st.next {
			delete(st.held, seq)
		}
	}
	if len(st.held) == 0 && st.state == Gapped && st.next > st.awaited {
		st.state, st.gapSince = Live, time.Time{}
	}
	return out
}

func (st *stream) heldHigh() int64 {
	var m int64
	for seq := range st.held {
		m = max(m, seq)
	}
	return m
}

// fallBehind gives up on live delivery: seq is known committed.
func (st *stream) fallBehind(seq int64) {
	st.until = max(st.until, seq, st.heldHigh())
	st.state, st.held, st.gapSince = Behind, nil, time.Time{}
}

// tick ends a gap that waited longer than gapWait; it reports whether the
// stream fell Behind.
func (st *stream) tick(now time.Time, gapWait time.Duration) bool {
	if st.state == Gapped && now.Sub(st.gapSince) > gapWait {
		st.fallBehind(0)
		st.settled = true
		return true
	}
	return false
}

// filled records what catch-up queued: n consecutive events from next on.
// complete says the source holds nothing newer than those (PostgreSQL
// returned fewer than asked), or, from the recent cache, that they reach
// the newest seq the fan-out saw; the stream then leaves Behind if that is
// past every seq known committed and every seq awaited (the cache's word
// is not enough before that) and returns the held events it releases.
// PostgreSQL's is: what it did not return up to an awaited seq is not
// the user's (their removal is on its way to the session).
func (st *stream) filled(n int, complete, fromCache bool) []item {
	st.next += int64(n)
	if !fromCache {
		st.verify, st.settled = false, true
	}
	if !complete || (fromCache && (st.next <= st.until || st.next <= st.awaited)) {
		return nil
	}
	st.state = Live
	out := st.release(nil)
	st.resume()
	return out
}

// awaits records that an event waits for the stream to reach seq
// (Session.admit): every entry up to seq is committed. A stream that has
// not got them treats it as it does an entry past a missing seq: it waits
// for them to arrive live, GapWait after the last that came in order, then
// catches up from PostgreSQL (they may be another node's, and the relay
// late). Until it has them, or PostgreSQL said they are not the user's, a
// live entry that comes meanwhile does not end the gap, nor does the
// recent cache end a catch-up (awaited). It reports whether the stream is
// Gapped now and was not.
func (st *stream) awaits(seq int64, now time.Time) bool {
	if st.end > 0 || st.has(seq) {
		return false
	}
	st.awaited = max(st.awaited, seq)
	if st.state != Live {
		return false // Gapped: the gap wait runs; Behind: catch-up reads up to seq
	}
	st.state, st.gapSince = Gapped, now
	return true
}

// skip moves a stream that is behind past seqs PostgreSQL does not hold,
// to seq: there is nothing there to send.
func (st *stream) skip(seq int64) {
	if seq <= st.next {
		return
	}
	st.next, st.fresh = seq, false
	st.sentHigh = max(st.sentHigh, seq-1)
}

// resync re-reads a stream's position from PostgreSQL after events were
// dropped: lastSeq is the conversation's newest seq now; unseen says the
// hub dropped events before its recent cache saw them.
func (st *stream) resync(lastSeq int64, unseen bool, large bool) {
	st.held = nil
	switch {
	case lastSeq >= st.next:
		st.state, st.gapSince = Behind, time.Time{}
	case st.has(st.awaited):
		st.state, st.gapSince = Live, time.Time{}
	default:
		// An event waits for an entry at or before a fresh stream's
		// start that may still be routed late (has), which last_seq
		// says nothing of: the gap wait it began goes on, or ends at
		// the next tick if none ran.
		st.state = Gapped
	}
	st.verify, st.until = st.state == Behind && unseen, max(st.until, lastSeq)
	st.large = large
}

// sent records that seq went to the client, unacknowledged.
func (st *stream) sent(seq int64) {
	st.unacked = append(st.unacked, seq)
	st.sentHigh = max(st.sentHigh, seq)
	st.fresh = false
}

// acked records the client's acknowledgement of seq and returns the new
// delivered cursor when it moved: the highest seq with everything up to it
// acknowledged.
func (st *stream) acked(seq int64) (cursor int64, moved bool) {
	for i, q := range st.unacked {
		if q == seq {
			st.unacked = append(st.unacked[:i], st.unacked[i+1:]...)
			break
		}
	}
	return st.advanceCursor()
}

// advanceCursor moves the saved cursor to what the acknowledgements allow.
func (st *stream) advanceCursor() (int64, bool) {
	cursor := st.sentHigh
	if len(st.unacked) > 0 {
		cursor = st.unacked[0] - 1
	}
	if cursor > st.saved {
		st.saved = cursor
		return cursor, true
	}
	return st.saved, false
}
