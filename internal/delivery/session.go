package delivery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	chat "github.com/chatd/chatd"
)

// Session is one connected client's delivery pump: the only writer to the
// client. It holds no goroutine while idle: other goroutines leave work in
// its mailbox (offer, ack, reply, resync, stop; none blocks) and the first
// to find the pump asleep starts it (on one of the hub's pump workers when
// one is idle); the pump takes the mailbox, sends, and exits when nothing
// is left, arming a timer (no goroutine either) for what is due later: a
// gap's timeout, the slow-consumer check of a full window, a catch-up
// retry. Only the running pump (or a PUBACK's caller standing in for it,
// ackAsleep) touches the fields below the mailbox.
type Session struct {
	ClientID   string
	UserID     int64
	Persistent bool

	hub  *Hub
	conn chat.Conn
	// window bounds the unacknowledged QoS 1 publishes: Options.Window, or
	// less when the client's Receive Maximum is (Hub.Attach).
	window int

	mu       sync.Mutex // guards the mailbox
	box      []item     // offered items, in order
	boxLive  int        // of them, live events (kMsg, kEvent, kTyping): bounded by QueueSize
	boxAcks  []uint16
	replies  []chat.Ack
	flags    sessionFlags
	running  bool // a pump goroutine runs (or is about to)
	stopped  bool // stop ran: nothing queued from now on is written
	overflow bool // live events were dropped since the last resync
	timer    *time.Timer

	// directs counts the direct publishes (error events, RPC replies)
	// queued and not yet written, in the mailbox or pending: bounded by
	// QueueSize too (offer).
	directs atomic.Int64

	done         chan struct{}
	loaded       chan struct{} // closed once the starting positions are read
	writingSince atomic.Int64
	unseen       atomic.Bool // set by resyncUnseen
	readyFlag    atomic.Bool // mirror of ready for observers
	started      time.Time

	// Owned by the running pump. The small fields sit together: an idle
	// session's struct stays in its allocation size class.
	isLoaded   bool
	ready      bool
	windowFull bool // the window filled with more to send: refill in bursts
	// mayBeBehind: a stream may be Behind. Only then do fill and anyBehind
	// look over every stream (a user may be in thousands of
	// conversations; the pump asks after each burst). Set by whatever can
	// make a stream Behind, cleared by a look that found none.
	mayBeBehind bool
	nextID      uint16
	streams     map[int64]*stream
	// left holds, for conversations whose stream ended (or was never
	// started: nothing was owed), the last_seq as of the stored cursors
	// that said so: a join or leave routed later at or before it is
	// stale, as for a stream (stale). Nil until a stream ends so.
	left map[int64]int64
	// later holds events of a conversation (read receipts, settings,
	// roles) that wait for the session's word that the user was a member
	// at their seq (admit). Nil while there are none.
	later    *waitList
	inflight map[uint16]inflight
	pending  []item
	replyOut []chat.Ack
	outBatch []chat.Packet
	gapped   map[int64]*stream // streams holding out-of-order events
	// progress is the last time the client showed it keeps up: its latest
	// PUBACK, or the moment the window filled when that is later. A full
	// window with no progress for SlowTimeout is a slow consumer; a PUBACK
	// missing since before a quiet stretch is not (the window was not
	// holding anything back meanwhile).
	progress time.Time
	fillWait time.Time // after a failed catch-up query, when to try again
	fillIDs  []int64
	catchUp  catchUp
}

type sessionFlags uint8

const (
	flagResync sessionFlags = 1 << iota // re-read positions from PostgreSQL
	flagTick                            // the timer fired
	flagStop                            // finish and stop for good
)

type inflight struct {
	conv, seq int64
	at        time.Time
	// own: the user wrote the entry themselves; its acknowledgement is not
	// handed to Options.Delivered (see onAck).
	own bool
}

func newSession(h *Hub, conn chat.Conn, clientID string, userID int64, persistent, ready bool) *Session {
	s := &Session{
		ClientID:   clientID,
		UserID:     userID,
		Persistent: persistent,
		hub:        h,
		conn:       conn,
		done:       make(chan struct{}),
		loaded:     make(chan struct{}),
		ready:      ready,
		started:    time.Now(),
		streams:    map[int64]*stream{},
	}
	s.catchUp = newCatchUp(h)
	return s
}

// wakeLocked starts the pump unless it runs, on an idle pump worker or
// else a goroutine of its own; s.mu is held (neither way blocks).
func (s *Session) wakeLocked() {
	if !s.running {
		s.running = true
		select {
		case s.hub.pumps <- s:
		default:
			go s.run()
		}
	}
}

// offer queues an item without blocking. Past QueueSize live events
// waiting, the session drops them and catches up from PostgreSQL, which
// has them; membership, readiness, notices and replies (PUBACKs) are never
// dropped.
// Past QueueSize direct publishes unwritten, further ones are dropped:
// each answers one of the client's publishes, and a QoS 0 publish waits
// for nothing, so a client that floods refused publishes while it reads
// or acknowledges nothing would otherwise grow its queue of error events
// without bound until its connection ends.
//
// Items offered together reach the pump together: a join and the
// member.added that announces it are one offer, or a pump that ran
// between them would catch the new stream up from PostgreSQL and send
// the join's entries before the event (docs/protocol.md "Events").
func (s *Session) offer(its ...item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range its {
		s.offerLocked(it)
	}
	s.wakeLocked()
}

func (s *Session) offerLocked(it item) {
	if it.kind == kDirect {
		if s.directs.Load() >= int64(s.hub.opts.QueueSize) {
			s.hub.opts.Metrics.DirectDropped.Inc()
			return
		}
		s.directs.Add(1)
	}
	if it.kind == kMsg || it.kind == kEvent || it.kind == kTyping {
		if s.boxLive >= s.hub.opts.QueueSize {
			if it.kind != kMsg {
				s.hub.opts.Metrics.EventsDropped.Inc()
			}
			if !s.overflow {
				s.overflow = true
				s.hub.opts.Metrics.Overflows.Inc()
			}
			s.flags |= flagResync
			return
		}
		s.boxLive++
	}
	s.box = append(s.box, it)
}

// ack hands over a PUBACK. More than a window's worth waiting means a
// broken or hostile client: the surplus is dropped. A PUBACK that finds the
// pump asleep with nothing else waiting is taken by the caller itself
// (ackAsleep): most PUBACKs come to a session that has sent what it had,
// and waking a pump for each costs a goroutine hand-off per delivery.
func (s *Session) ack(id uint16) {
	s.mu.Lock()
	if !s.running && s.emptyLocked() {
		s.running = true // the caller stands in for the pump
		s.mu.Unlock()
		s.ackAsleep(id)
		return
	}
	defer s.mu.Unlock()
	s.queueAckLocked(id)
}

func (s *Session) queueAckLocked(id uint16) {
	if len(s.boxAcks) < 4*s.window+64 {
		s.boxAcks = append(s.boxAcks, id)
		s.wakeLocked()
	}
}

// ackAsleep takes a PUBACK in the pump's place (the caller set running).
// Only the bookkeeping runs here: what the pump would do besides (write
// what the window held back, catch up, the slow-consumer check) is due
// only when the window held something back, and then the pump takes the
// PUBACK as usual. Nothing here blocks or reads PostgreSQL: the caller is
// the client's read loop.
func (s *Session) ackAsleep(id uint16) {
	if s.isLoaded && !s.held() && len(s.pending) == 0 {
		s.onAck(id)
		s.idle()
		if s.park() {
			return
		}
		s.mu.Lock() // work came meanwhile: the pump takes it
	} else {
		s.mu.Lock()
		s.queueAckLocked(id)
	}
	s.running = false
	s.wakeLocked()
	s.mu.Unlock()
}

// errAckNotWritten is what an acknowledgement's Sent hears when its
// connection closed before it could be written.
var errAckNotWritten = errors.New("connection closed before the acknowledgement was written")

// reply queues acknowledgements of the client's publishes, in order;
// never dropped: there are at most as many as the client may have
// publishes in flight. On a stopped session (the hub found it just
// before it stopped) they hear at once that they were not written.
func (s *Session) reply(acks []chat.Ack) {
	s.mu.Lock()
	stopped := s.stopped
	if !stopped {
		s.replies = append(s.replies, acks...)
		s.wakeLocked()
	}
	s.mu.Unlock()
	if stopped {
		notWritten(acks)
	}
}

// notWritten tells acknowledgements that they will never be written.
func notWritten(acks []chat.Ack) {
	for _, a := range acks {
		if a.Sent != nil {
			a.Sent(errAckNotWritten)
		}
	}
}

// resyncUnseen is resync after the hub dropped events before its recent
// cache saw them: catch-up must then ask PostgreSQL, not the cache.
func (s *Session) resyncUnseen() {
	s.unseen.Store(true)
	s.resync()
}

func (s *Session) resync() { s.signal(flagResync) }

func (s *Session) signal(f sessionFlags) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flags |= f
	s.wakeLocked()
}

// Loaded is closed once the session has read its starting positions from
// PostgreSQL: events committed after that are delivered.
func (s *Session) Loaded() <-chan struct{} { return s.loaded }

// Done is closed when the session has stopped.
func (s *Session) Done() <-chan struct{} { return s.done }

func (s *Session) stopAndWait(ctx context.Context) {
	s.signal(flagStop)
	select {
	case <-s.done:
	case <-ctx.Done():
	}
}

// mail is what the pump takes from the mailbox in one go.
type mail struct {
	items   []item
	acks    []uint16
	flags   sessionFlags
	replies bool
}

func (s *Session) emptyLocked() bool {
	return len(s.box) == 0 && len(s.boxAcks) == 0 && s.flags == 0 && len(s.replies) == 0
}

// park marks the pump stopped if the mailbox is still empty (under the
// same lock, so no offer finds it running and leaves work behind).
func (s *Session) park() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.emptyLocked() {
		return false
	}
	s.running = false
	return true
}

// take empties the mailbox; it reports false when there was nothing. The
// slices handed out are the mailbox's own: the next offer starts a fresh
// one.
func (s *Session) take() (mail, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.emptyLocked() {
		return mail{}, false
	}
	m := mail{items: s.box, acks: s.boxAcks, flags: s.flags, replies: len(s.replies) > 0}
	s.box, s.boxAcks, s.boxLive, s.flags = nil, nil, 0, 0
	if m.flags&flagResync != 0 {
		s.overflow = false
	}
	if m.replies {
		s.replyOut = append(s.replyOut, s.replies...)
		clear(s.replies)
		s.replies = s.replies[:0]
	}
	return m, true
}

// run is the pump: it loads the starting positions once, then works off
// the mailbox until it is empty.
func (s *Session) run() {
	if !s.isLoaded {
		if !s.load() {
			s.stop()
			return
		}
		s.isLoaded = true
		close(s.loaded)
		// Streams that start behind catch up without waiting for mail.
		if !s.pump() {
			s.finish()
			s.stop()
			return
		}
		s.arm()
	}
	for {
		m, ok := s.take()
		if !ok {
			s.idle()
			if s.park() {
				return
			}
			continue
		}
		if m.flags&flagStop != 0 {
			// PUBACKs that came before the end still move the cursors.
			for _, id := range m.acks {
				s.onAck(id)
			}
			s.finish()
			s.stop()
			return
		}
		if m.flags&flagResync != 0 {
			// Entries go (catch-up reads them back in order); joins and
			// leaves apply before the positions are re-read, so a
			// conversation joined meanwhile catches up from its join.
			// Other events stay: nothing reads them back, and they are
			// decided by the streams as re-read (admit).
			rest := m.items[:0]
			for _, it := range m.items {
				switch it.kind {
				case kJoin, kLeave:
					s.accept(it)
				case kMsg:
				default:
					rest = append(rest, it)
				}
			}
			m.items = rest
			s.doResync()
		}
		for _, it := range m.items {
			s.accept(it)
		}
		// Items that came with the PUBACKs count as waiting before the
		// window opened (noteFull), whichever arrived first.
		s.noteFull()
		for _, id := range m.acks {
			s.onAck(id)
		}
		if !s.tick(time.Now()) {
			s.hub.opts.Logger.Warn("disconnecting slow consumer: no acknowledgements", "client", s.ClientID, "user", s.UserID)
			s.conn.Close("slow consumer: no acknowledgements")
			s.finish()
			s.stop()
			return
		}
		if !s.pump() {
			s.hub.opts.Logger.Debug("delivery stopped: write failed", "client", s.ClientID, "user", s.UserID)
			s.finish()
			s.stop()
			return
		}
		s.arm()
	}
}

// stop ends the session for good: the pump never runs again (running
// stays set), later offers only queue. Acknowledgements that came after
// finish took the waiting ones, and any that come later, hear they were
// not written.
func (s *Session) stop() {
	s.mu.Lock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	unsent := s.replies
	s.box, s.boxAcks, s.replies = nil, nil, nil
	s.mu.Unlock()
	notWritten(unsent)
	s.hub.remove(s)
	close(s.done)
}

// arm sets the timer for the earliest thing due later, or stops it.
func (s *Session) arm() {
	var due time.Duration
	set := func(d time.Duration) {
		if due == 0 || d < due {
			due = max(d, time.Millisecond)
		}
	}
	if len(s.gapped) > 0 {
		set(max(s.hub.opts.GapWait/4, time.Millisecond))
	}
	if s.held() {
		set(time.Until(s.progress.Add(s.hub.opts.SlowTimeout)) + time.Millisecond)
	}
	if d := time.Until(s.fillWait); d > 0 && s.ready && s.anyBehind() {
		set(d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case due == 0:
		if s.timer != nil {
			s.timer.Stop()
		}
	case s.timer == nil:
		s.timer = time.AfterFunc(due, func() { s.signal(flagTick) })
	default:
		s.timer.Reset(due)
	}
}

// idle gives back what a burst grew: an idle session keeps only its
// streams (a connection that gets a message a minute holds no window's
// worth of buffers).
func (s *Session) idle() {
	if len(s.pending) == 0 {
		s.pending = nil
	}
	if len(s.inflight) == 0 {
		s.inflight = nil
	}
	if len(s.gapped) == 0 {
		s.gapped = nil
	}
	s.outBatch, s.replyOut, s.fillIDs = nil, nil, nil
	s.catchUp.release()
}

// noteFull marks a full window with more to send as fallen behind, as
// pump does when the window fills with more to send: what arrives after it
// filled (queued, or a stream now behind, to be filled from the catch-up
// sources) must not be released one per PUBACK either.
func (s *Session) noteFull() {
	if len(s.inflight) >= s.window && s.moreToSend() {
		s.windowFull = true
	}
}

// moreToSend: items are queued, or a stream has entries still to fetch.
func (s *Session) moreToSend() bool { return len(s.pending) > 0 || s.anyBehind() }

// load reads the starting cursors, retrying while the database is away.
func (s *Session) load() bool {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(s.hub.ctx, 10*time.Second)
		cs, err := s.hub.store.Cursors(ctx, s.ClientID, s.UserID, s.Persistent)
		cancel()
		if err == nil {
			for _, c := range cs {
				st := newStream(c.Delivered, c.LastSeq, c.MemberCount > s.hub.opts.LargeGroup)
				st.floor = c.JoinSeq
				// Stored cursors were read as of the connect.
				st.fresh = !s.Persistent && c.End == 0
				if c.End > 0 {
					// Left (and maybe added back, and left again):
					// every membership's unacknowledged entries, in turn.
					st.follow(owed(c))
					if st.finished() {
						continue // nothing of it is owed
					}
				}
				s.streams[c.ConversationID] = st
			}
			s.noteRead(cs)
			s.mayBeBehind = true
			return true
		}
		s.hub.opts.Logger.Warn("load delivery cursors failed; retrying", "client", s.ClientID, "err", err)
		if !s.sleep(backoff) || !s.writeWaitingReplies() {
			return false
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// sleep waits d unless the session is stopped meanwhile; acknowledgements
// that arrive meanwhile are written at once.
func (s *Session) sleep(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		stopped := s.flags&flagStop != 0
		s.mu.Unlock()
		if stopped || s.hub.ctx.Err() != nil || !s.writeWaitingReplies() {
			return false
		}
		time.Sleep(min(20*time.Millisecond, time.Until(deadline)))
	}
	return true
}

// writeWaitingReplies writes the acknowledgements of the client's
// publishes queued so far. They never wait for this session's positions:
// while PostgreSQL is down the positions cannot load, and the refusals of
// the client's sends ("unavailable") are exactly what it must hear then.
func (s *Session) writeWaitingReplies() bool {
	s.mu.Lock()
	s.replyOut = append(s.replyOut, s.replies...)
	clear(s.replies)
	s.replies = s.replies[:0]
	s.mu.Unlock()
	return s.flushReplies()
}

// finish writes the acknowledgements still waiting (a stopping server
// answers every publish it committed) and saves the cursors.
func (s *Session) finish() {
	s.mu.Lock()
	s.replyOut = append(s.replyOut, s.replies...)
	s.replies = nil
	s.mu.Unlock()
	if len(s.replyOut) > 0 {
		s.write(nil)
	}
	s.saveCursors()
}

func (s *Session) accept(it item) {
	switch it.kind {
	case kReady:
		s.ready = true
		s.readyFlag.Store(true)
	case kUnready:
		s.ready = false
		s.readyFlag.Store(false)
	case kNotice:
		if !s.leftBefore(it) {
			s.pending = append(s.pending, it)
		}
	case kDirect, kAfter:
		s.pending = append(s.pending, it)
	case kEvent:
		switch {
		case !s.ready:
		case len(s.pending) >= s.hub.opts.QueueSize:
			s.hub.opts.Metrics.EventsDropped.Inc()
		case it.conv == 0:
			s.pending = append(s.pending, it) // presence, profiles
		default:
			s.admit(it)
		}
	case kTyping:
		// Only in a conversation the session follows as a member, and
		// only once it has every entry committed before the typist was
		// checked (it.seq): a removal the fan-out has not routed yet (it
		// committed on another node, and the relay has not brought it)
		// keeps the removed member's stream behind that seq, so the
		// member index's stale word does not reach them.
		st := s.streams[it.conv]
		if st != nil && st.end == 0 && st.next > it.seq && s.ready {
			if len(s.pending) < s.hub.opts.QueueSize {
				s.pending = append(s.pending, it)
			} else {
				s.hub.opts.Metrics.EventsDropped.Inc()
			}
		}
	case kJoin:
		if s.stale(it) {
			return
		}
		s.mayBeBehind = true
		// A stream still delivering what a previous membership was owed
		// finishes it first.
		switch st, ok := s.streams[it.conv]; {
		case !ok:
			s.streams[it.conv] = joinedStream(it.seq)
		case st.end > 0:
			st.rejoined(it.seq)
		case it.seq > st.floor:
			// A join past the one the stream follows: a leave came
			// between them that the session has not heard of (another
			// node's, the relay late; older than this join, the member
			// index does not route it at all). PostgreSQL says where it
			// was (doResync).
			s.resync()
		}
	case kLeave:
		if s.stale(it) || s.leftBefore(it) {
			return
		}
		s.mayBeBehind = true
		// What was committed up to the leave (it.seq) is still theirs:
		// queued entries stay, and a stream that has not reached it yet
		// fetches the rest from PostgreSQL before it ends. This
		// membership's entries queued slim are taken back and read again,
		// whole (stream.slim); not an earlier membership's, queued whole
		// already: reading again from one of those would read what was
		// committed while the user was away.
		st := s.streams[it.conv]
		slim := st != nil && st.slim()
		var again int64
		s.pending = slices.DeleteFunc(s.pending, func(p item) bool {
			switch {
			case p.kind != kMsg || p.conv != it.conv:
				return false
			case p.seq > it.seq:
				return true
			case !slim || p.seq <= st.floor:
				return false
			}
			if again == 0 || p.seq < again {
				again = p.seq
			}
			return true
		})
		if again > 0 {
			st.unqueue(again)
		}
		if st == nil || st.leave(it.seq) {
			s.endStream(it.conv)
		}
	case kMsg:
		st := s.streams[it.conv]
		if st == nil {
			// Not a conversation this session knows the user is in: the
			// fan-out's member list was older or newer than the session's
			// (a membership change it applied late, or one it lost).
			// Nothing is delivered on its word; PostgreSQL decides, and
			// catch-up delivers the entry if it is the user's.
			s.hub.opts.Metrics.Strays.Inc()
			s.resync()
			return
		}
		if r, ok := st.rewound(it.seq); ok {
			st = r
			s.streams[it.conv] = r
		}
		room := s.ready && len(s.pending) < s.hub.opts.QueueSize
		s.pending = st.offer(s.pending, it, room, time.Now())
		if st.state == Behind {
			s.mayBeBehind = true
		}
		if st.state == Gapped {
			if s.gapped == nil {
				s.gapped = map[int64]*stream{}
			}
			s.gapped[it.conv] = st
		}
	}
}

// laterEvent is an event of a conversation waiting in Session.later.
// blind: it came when the session had no stream of its conversation, and
// waits for a resync to say whether the user is a member.
type laterEvent struct {
	it    item
	blind bool
}

// laterDecision is what admit does with an event of a conversation.
type laterDecision uint8

const (
	laterWait laterDecision = iota
	laterSend
	laterDrop
)

// decideLater says what becomes of an event of st's conversation at seq
// (it.seq, its place in the conversation: the entry it came with, or the
// last_seq when it committed, see routeTo): it goes out once the stream
// has every entry up to it, which the stream gets only while the user is
// a member; it is dropped if that membership ended before it, unless the
// user joined again meanwhile. sinceJoin: the event is for the membership
// the stream follows from its floor (its join), and is dropped if
// committed before it: the user was away, or not yet a member.
func decideLater(st *stream, it item, sinceJoin bool) laterDecision {
	seq := it.seq
	if sinceJoin && !ofJoin(it, st.floor) {
		return laterDrop // committed before the join that made it theirs
	}
	if st.end > 0 && seq > st.end {
		for _, m := range st.rejoins {
			if ofJoin(it, m.join) && (m.end == 0 || seq <= m.end) {
				return laterWait
			}
		}
		return laterDrop
	}
	if st.has(seq) {
		return laterSend
	}
	return laterWait
}

// ofJoin reports whether the event it of a conversation was committed
// after the user's join at seq join, or is that join's member.added. A
// join carries the conversation's last_seq before it and commits with the
// entry that announces it, one past it (store AddMember): an event at the
// join's seq, its entry's or the last_seq it saw (a leave's too),
// committed before it. Only a group's creation writes no entry: what
// follows it is at 0 too.
func ofJoin(it item, join int64) bool {
	return it.seq > join || it.seq == join && (it.join || join == 0)
}

// admit decides an event of a conversation that is not an entry
// (read.updated, member.updated, conversation.updated and the rest): as
// for an entry, the session's word decides, not the fan-out's member
// index, which can be stale (a removal or join committed on another node
// and not relayed yet, see the package doc). The event goes out once the
// conversation's stream has every entry up to its seq: a removed member's
// stream never gets past their removal. Until then it waits (later), and
// the stream waits for those entries as for a gap (awaits): while they
// come in order, then GapWait, then PostgreSQL; a
// conversation with no stream makes the session re-read its
// conversations, and the event waits for that answer. An event that may
// go out while earlier ones of its conversation still wait goes after
// them (releaseLater): a client keeps the last read watermark or role it
// hears, which must be the newest.
func (s *Session) admit(it item) {
	st := s.streams[it.conv]
	blind := st == nil
	// Past QueueSize waiting, an event that would wait may be dropped
	// (waitList), and then nothing waits for its entries.
	full := s.later != nil && !s.later.room(it.conv, s.hub.opts.QueueSize)
	if !blind {
		// A stream that is not ending follows the membership that
		// lasts, from its join: what came before it (a leave and a
		// re-add, the event relayed late) is not the user's. One that is
		// ending decides by its end and the joins after it.
		switch decideLater(st, it, st.end == 0) {
		case laterSend:
			if !s.waiting(it.conv) {
				s.pending = append(s.pending, it)
				return
			}
		case laterDrop:
			return
		default:
			if full {
				s.hub.opts.Metrics.EventsDropped.Inc()
				return
			}
			if st.awaits(it.seq, time.Now()) {
				if s.gapped == nil {
					s.gapped = map[int64]*stream{}
				}
				s.gapped[it.conv] = st
			}
		}
	}
	if full {
		s.hub.opts.Metrics.EventsDropped.Inc()
		return
	}
	if s.later == nil {
		s.later = &waitList{}
	}
	s.later.add(laterEvent{it: it, blind: blind}, s.hub.opts.QueueSize)
	if blind {
		s.resync()
	}
}

// waiting reports whether an event of conversation id waits in s.later.
func (s *Session) waiting(id int64) bool {
	return s.later != nil && s.later.has(id)
}

// releaseLater queues the waiting events whose streams now have every
// entry up to them, and drops those that are not the user's: their
// stream ended before them, or there is none (the resync the event waited
// for found the user no member).
func (s *Session) releaseLater() {
	if s.later == nil {
		return
	}
	s.later.filter(func(w *laterEvent) bool {
		d := laterWait
		if st := s.streams[w.it.conv]; st != nil {
			d = decideLater(st, w.it, w.blind)
		} else if !w.blind {
			d = laterDrop
		}
		if d == laterSend && s.ready {
			if len(s.pending) < s.hub.opts.QueueSize {
				s.pending = append(s.pending, w.it)
			} else {
				s.hub.opts.Metrics.EventsDropped.Inc()
			}
		}
		return d == laterWait
	})
	if s.later.len() == 0 {
		s.later = nil
	}
}

// dropLater drops the waiting events of conversation id: the user's
// membership the session knew of ended (endStream), and a later one
// starts after them.
func (s *Session) dropLater(id int64) {
	if s.later == nil {
		return
	}
	s.later.filter(func(w *laterEvent) bool { return w.it.conv != id })
	if s.later.len() == 0 {
		s.later = nil
	}
}

// pump sends pending items while the window allows and refills pending
// from the catch-up sources for streams that are behind. It returns false
// when the connection is gone.
func (s *Session) pump() bool {
	for {
		// Everything the window allows goes out in one write: one syscall
		// for a burst instead of one per message.
		window := s.window
		if s.windowFull {
			// The client fell a full window behind; refill in bursts of a
			// quarter window rather than one packet per PUBACK, which on a
			// busy server costs a system call per delivery.
			if len(s.inflight) > window-max(1, window/4) && len(s.inflight) > 0 {
				return s.flushReplies()
			}
			s.windowFull = false
		}
		s.releaseLater()
		batch := s.outBatch[:0]
		var after func()
		for len(s.pending) > 0 && len(s.inflight) < window {
			it := s.pending[0]
			s.pending[0] = item{}
			s.pending = s.pending[1:]
			if it.kind == kAfter {
				after = it.after // once this batch is written
				break
			}
			if it.kind == kDirect {
				s.directs.Add(-1)
			}
			batch = append(batch, s.prepare(it))
		}
		s.outBatch = batch
		if (len(batch) > 0 || len(s.replyOut) > 0) && !s.write(batch) {
			return false
		}
		if after != nil {
			after()
			continue
		}
		if len(s.inflight) >= window {
			s.windowFull = s.moreToSend()
			return true
		}
		if len(s.pending) > 0 || !s.ready {
			return true
		}
		if !s.fill() {
			return true
		}
	}
}

// flushReplies writes waiting acknowledgements even while the delivery
// window holds everything else back.
func (s *Session) flushReplies() bool {
	if len(s.replyOut) == 0 {
		return true
	}
	return s.write(nil)
}

// fill queues the next events of streams that are behind; it reports
// whether it queued anything.
func (s *Session) fill() bool {
	if !s.mayBeBehind || time.Now().Before(s.fillWait) {
		return false
	}
	behind := s.fillIDs[:0]
	for id, st := range s.streams {
		if st.state == Behind {
			behind = append(behind, id)
		}
	}
	// Lowest id first: deterministic, and every behind stream gets its
	// turn because a caught-up one stops being behind.
	slices.Sort(behind)
	s.fillIDs = behind
	if len(behind) == 0 {
		s.mayBeBehind = false
		return false
	}
	before := len(s.pending)
	if err := s.catchUp.fill(s, behind); err != nil {
		s.hub.opts.Logger.Warn("catch-up read failed; retrying", "client", s.ClientID, "conversations", len(behind), "err", err)
		s.fillWait = time.Now().Add(500 * time.Millisecond)
	}
	return len(s.pending) > before
}

func (s *Session) anyBehind() bool {
	if !s.mayBeBehind {
		return false
	}
	for _, st := range s.streams {
		if st.state == Behind {
			return true
		}
	}
	s.mayBeBehind = false
	return false
}

func (s *Session) nextPacketID() uint16 {
	for {
		s.nextID++
		if s.nextID == 0 {
			s.nextID = 1
		}
		if _, used := s.inflight[s.nextID]; !used {
			return s.nextID
		}
	}
}

// prepare assigns a packet id and records the publish as in flight; the
// record stands even if the write then fails, because the session ends then.
func (s *Session) prepare(it item) chat.Packet {
	p := chat.Packet{Topic: it.topic, Payload: it.payload, QoS: it.qos, CorrelationData: it.corr}
	m := s.hub.opts.Metrics
	m.Delivered.Inc()
	now := time.Now()
	if it.kind == kMsg && !it.at.IsZero() {
		m.Latency.Observe(now.Sub(it.at).Seconds())
	}
	if p.QoS == 0 {
		return p
	}
	p.PacketID = s.nextPacketID()
	if len(s.inflight) == 0 || len(s.inflight) == s.window-1 {
		s.progress = now // the first in flight, or the window fills now
	}
	inf := inflight{at: now}
	if it.kind == kMsg {
		inf.conv, inf.seq, inf.own = it.conv, it.seq, it.writer == s.UserID
		if st := s.streams[it.conv]; st != nil {
			st.sent(it.seq)
		}
	}
	if s.inflight == nil {
		s.inflight = map[uint16]inflight{}
	}
	s.inflight[p.PacketID] = inf
	return p
}

// write sends the waiting acknowledgements and batch in one call; an
// acknowledgement that closes the connection ends the write after the ones
// before it.
func (s *Session) write(batch []chat.Packet) bool {
	acks := s.replyOut
	closeReason := ""
	for i, a := range acks {
		if a.Close != "" {
			acks, closeReason, batch = acks[:i], a.Close, nil
			break
		}
	}
	s.writingSince.Store(time.Now().UnixNano())
	err := s.conn.Write(acks, batch)
	s.writingSince.Store(0)
	for _, a := range acks {
		if a.Sent != nil {
			a.Sent(err)
		}
	}
	notWritten(s.replyOut[len(acks):]) // the connection closes instead
	for _, p := range batch {
		if p.TooLarge {
			// Never to reach this client: done with, as if acknowledged.
			// Its seq is a gap the client fills through history.
			s.hub.opts.Metrics.TooLarge.Inc()
			if err == nil && p.PacketID != 0 {
				s.onAck(p.PacketID)
			}
		}
	}
	clear(batch)
	clear(s.replyOut)
	s.replyOut = s.replyOut[:0]
	if closeReason != "" {
		s.conn.Close(closeReason)
		return false
	}
	return err == nil
}

func (s *Session) onAck(id uint16) {
	inf, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	s.progress = time.Now()
	if inf.seq == 0 {
		return
	}
	s.hub.opts.Metrics.Acked.Inc()
	st := s.streams[inf.conv]
	if st == nil {
		return
	}
	// An entry the user wrote is not handed to the delivered watermark:
	// writing it moved their read watermark to it, and a user's delivered
	// watermark tells others which of *their* entries reached the user. For
	// a user whose read receipts are on, the delivered flush counts the read
	// watermark as delivered and would drop the acknowledgement anyway
	// (store deliveredPlanSQL), after reading it: in a direct chat, about
	// half the rows it plans. For one whose receipts are off it moved
	// last_delivered_seq past their own entry; now their watermark stops at
	// the last entry of someone else they acknowledged, which is all any
	// delivered tick (delivery.updated, deliveredSeq, deliveredTo) compares
	// it with: no tick of another's entry changes, except one their device
	// never received (a clean session started past it), which is no longer
	// claimed delivered. protocol.md "Delivery receipts" says so.
	if d := s.hub.opts.Delivered; d != nil && !inf.own {
		d.Delivered(inf.conv, s.UserID, inf.seq)
	}
	if cursor, moved := st.acked(inf.seq); moved && s.Persistent {
		s.hub.saveCursor(chat.Cursor{ClientID: s.ClientID, ConversationID: inf.conv, Seq: cursor})
	}
	if st.finished() {
		// A conversation the user left, acknowledged up to the leave.
		s.endStream(inf.conv)
	}
}

// held: the window holds publishes back (it is full, or refilling after it
// filled) while some are unacknowledged.
func (s *Session) held() bool {
	return (len(s.inflight) >= s.window || s.windowFull) && len(s.inflight) > 0
}

// tick handles gap timeouts and detects a client that stopped acknowledging.
func (s *Session) tick(now time.Time) bool {
	for id, st := range s.gapped {
		if st.state != Gapped || s.streams[id] != st {
			delete(s.gapped, id)
			continue
		}
		if st.tick(now, s.hub.opts.GapWait) {
			delete(s.gapped, id)
			s.mayBeBehind = true
		}
	}
	if s.held() && now.Sub(s.progress) > s.hub.opts.SlowTimeout {
		s.hub.opts.Metrics.SlowDisconnect.Inc()
		return false
	}
	return true
}

// doResync drops queued live events and re-reads membership and positions
// from PostgreSQL; what was dropped is then read back in order.
func (s *Session) doResync() {
	s.mayBeBehind = true
	unseen := s.unseen.Swap(false)
	ctx, cancel := context.WithTimeout(s.hub.ctx, 10*time.Second)
	cs, err := s.hub.store.Cursors(ctx, s.ClientID, s.UserID, s.Persistent)
	cancel()
	if err != nil {
		if unseen {
			s.unseen.Store(true)
		}
		s.hub.opts.Logger.Warn("resync failed; retrying", "client", s.ClientID, "err", err)
		time.AfterFunc(500*time.Millisecond, s.resync)
		return
	}
	seen := map[int64]bool{}
	for _, c := range cs {
		seen[c.ConversationID] = true
		large := c.MemberCount > s.hub.opts.LargeGroup
		st := s.streams[c.ConversationID]
		if c.End > 0 {
			// Left since a membership the session may still be
			// delivering began (stored cursors only), and maybe added
			// back, and maybe removed again.
			switch {
			case st == nil && c.JoinSeq == 0 && len(c.Rejoins) == 0:
				continue // a stream this session ended, or never had
			case st == nil:
				st = newStream(c.Delivered, c.LastSeq, large)
				st.floor = c.JoinSeq
				st.follow(owed(c))
				s.streams[c.ConversationID] = st
				continue
			}
			// A stream this session still has missed leaves or joins
			// (lost to an overflow): it finishes what it owes and goes
			// on with each membership it did not know of.
			ending := st.end
			st.follow(owed(c))
			if st.end != ending {
				delete(s.gapped, c.ConversationID)
			}
			if st.finished() {
				s.endStream(c.ConversationID)
				continue
			}
			if st.end > 0 {
				continue
			}
			// It follows the membership that lasts: below.
		}
		if st == nil {
			if s.Persistent {
				st = newStream(c.Delivered, c.LastSeq, large)
			} else {
				// Joined while this session ran, and the join did not
				// reach it (its event was lost to an overflow): what
				// came after the join is due, as for a join that did.
				st = newStream(min(c.JoinSeq, c.LastSeq), c.LastSeq, large)
			}
			st.verify = st.state == Behind
			st.floor = c.JoinSeq
			s.streams[c.ConversationID] = st
			continue
		}
		if st.end > 0 {
			// Still delivering what the user was owed before leaving, and
			// a member again: the join was lost to an overflow. The
			// stream goes on after it once that is done.
			st.rejoined(c.JoinSeq)
			continue
		}
		if c.JoinSeq >= st.next {
			// A leave and a rejoin lost to an overflow, on a session
			// without stored cursors: the stream is of the old
			// membership. What was committed while the user was away is
			// not theirs (catch-up reads nothing of it); the stream
			// follows the new membership from its join, and what the old
			// one still owed is given up (nothing says where the leave
			// was: the removal's end_seq is on stored cursors only).
			st = newStream(c.JoinSeq, c.LastSeq, large)
			st.verify = st.state == Behind
			st.floor = c.JoinSeq
			s.streams[c.ConversationID] = st
			delete(s.gapped, c.ConversationID)
			continue
		}
		st.floor = c.JoinSeq
		// Events this session dropped itself went through the recent
		// cache first; events the hub dropped did not.
		st.resync(c.LastSeq, unseen, large)
		if st.state == Gapped {
			if s.gapped == nil {
				s.gapped = map[int64]*stream{}
			}
			s.gapped[c.ConversationID] = st
		} else {
			delete(s.gapped, c.ConversationID)
		}
	}
	for id, st := range s.streams {
		if !seen[id] && st.end == 0 {
			s.endStream(id)
		}
	}
	s.noteRead(cs)
	// The events that waited for this answer have it: a conversation with
	// no stream now is not the user's, nor what came before their join.
	// Nor, for one that waited on a stream, what came before the join of
	// the membership the stream follows now: the positions read may hold
	// a leave and a re-add the session had not heard of, and the stream
	// has started over at the join, or gone on after it (follow). An
	// event of the membership it followed is not waiting: the stream
	// passed its seq before it went on (resume), and it went out.
	if s.later != nil {
		s.later.filter(func(w *laterEvent) bool {
			if st := s.streams[w.it.conv]; st != nil && (w.blind || st.end == 0) && !ofJoin(w.it, st.floor) {
				return false
			}
			w.blind = false
			return true
		})
	}
}

// noteRead records on each stream the last_seq of its conversation in cs,
// stored cursors just read: a join or leave before it is in them (one
// snapshot, and a conversation's entries commit in seq order; see stale
// for one at it), and
// the stream follows it already. Routed again by a fan-out that lagged
// behind the read, a leave would end the membership the stream follows
// now (dropping what it queued after the leave) and the join after it
// would read back what was already sent: duplicates (stale).
func (s *Session) noteRead(cs []chat.ConvCursor) {
	for _, c := range cs {
		if st := s.streams[c.ConversationID]; st != nil {
			st.read = max(st.read, c.LastSeq)
		} else {
			// Owed nothing (any more): no stream to keep the word.
			s.noteLeft(c.ConversationID, c.LastSeq)
		}
	}
}

// endStream ends conversation id's stream, if any; what its stored
// cursors said stays known (left).
func (s *Session) endStream(id int64) {
	if st := s.streams[id]; st != nil {
		s.noteLeft(id, st.read)
	}
	delete(s.streams, id)
	delete(s.gapped, id)
	s.dropLater(id)
}

// noteLeft records that the stored cursors read hold every join and leave
// of conversation id up to seq, which has no stream (seq 0 too: a group
// with no entry yet).
func (s *Session) noteLeft(id, seq int64) {
	if old, ok := s.left[id]; ok && seq <= old {
		return
	}
	if s.left == nil {
		s.left = map[int64]int64{}
	}
	s.left[id] = seq
}

// stale reports whether the join or leave it is one that the stored
// cursors its conversation's stream was read from hold already
// (noteRead), or that those of a conversation with no stream did. Of a
// conversation they did not hold, none is: a group created since joins
// its members at seq 0.
//
// A join or leave carries the conversation's last_seq before it, and
// commits with the system entry that says so, one past it (store
// AddMember, RemoveMember): cursors that read last_seq k hold the joins
// and leaves before k, not one at k, which committed after them. Only a
// group's creation writes no entry: its join at 0 then finds the stream
// those cursors made, and changes nothing.
func (s *Session) stale(it item) bool {
	if st := s.streams[it.conv]; st != nil {
		return it.seq < st.read
	}
	left, ok := s.left[it.conv]
	return ok && it.seq < left
}

// leftBefore reports whether the leave it (or member.removed, its notice)
// ended a membership before the one its conversation's stream follows as
// lasting, or the last one it rejoined: the user was added back since,
// and the leave came late (routed again by a member index that forgot
// which membership events of its member it applied). It is not theirs
// any more: it neither ends the membership that followed, nor tells the
// client they are not a member.
func (s *Session) leftBefore(it item) bool {
	st := s.streams[it.conv]
	if st == nil {
		return false
	}
	join := st.floor
	if n := len(st.rejoins); n > 0 {
		join = st.rejoins[n-1].join
	} else if st.end > 0 {
		return false // the leave of the membership it ends, or that again
	}
	return !ofJoin(it, join)
}

// owed lists the memberships stored cursor c says the session is owed,
// oldest first: the one that ended at c.End (the cursor is in it), those
// in c.Rejoins, then the one that lasts (end 0) when the user is a
// member.
func owed(c chat.ConvCursor) []membership {
	ms := make([]membership, 0, 2+len(c.Rejoins))
	ms = append(ms, membership{join: c.Delivered, end: c.End})
	for _, r := range c.Rejoins {
		ms = append(ms, membership{join: r.Join, end: r.End})
	}
	if c.JoinSeq > 0 {
		ms = append(ms, membership{join: c.JoinSeq})
	}
	return ms
}

func (s *Session) saveCursors() {
	if !s.Persistent {
		return
	}
	for id, st := range s.streams {
		if cursor, moved := st.advanceCursor(); moved {
			s.hub.saveCursor(chat.Cursor{ClientID: s.ClientID, ConversationID: id, Seq: cursor})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := s.hub.flushCursors(ctx); err != nil {
		s.hub.opts.Logger.Warn("flush delivered cursors of a stopping session failed; they flush later", "client", s.ClientID, "err", err)
	}
	cancel()
}
