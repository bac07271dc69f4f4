package delivery

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/store"
)

// Session is one connected client's delivery pump. All fields below the
// channels are owned by the pump goroutine.
type Session struct {
	ClientID   string
	UserID     int64
	Persistent bool

	hub          *Hub
	conn         Conn
	topic        string
	in           chan item
	acks         chan uint16
	resyncCh     chan struct{}
	stopCh       chan struct{}
	stopOnce     sync.Once
	done         chan struct{}
	loaded       chan struct{} // closed once the starting positions are read
	overflow     atomic.Bool
	unseen       atomic.Bool // set by resyncUnseen
	writingSince atomic.Int64
	readyFlag    atomic.Bool // mirror of ready for observers
	started      time.Time

	ready      bool
	convs      map[int64]*convState
	inflight   map[uint16]inflight
	pending    []item
	outBatch   []Packet
	gapped     map[int64]*convState // conversations holding out-of-order events
	nextID     uint16
	lastAck    time.Time
	fillWait   time.Time // after a failed catch-up query, when to try again
	fillIDs    []int64
	recentBuf  []recentEntry
	windowFull bool // the window filled with more to send: refill in bursts
}

type convState struct {
	next     int64 // next seq to hand to the client
	behind   bool  // PostgreSQL may hold seqs >= next that we have not queued
	until    int64 // while behind: the recent cache may end catch-up only past this seq (known committed)
	verify   bool  // catch up from PostgreSQL, not the recent cache (after a resync: events may have been dropped before the cache saw them)
	held     map[int64]item
	gapSince time.Time
	unacked  []int64 // sent, not yet acknowledged, ascending
	sentHigh int64
	saved    int64 // last cursor handed to the writer
	large    bool  // more members than LargeGroup: message.new without body
}

type inflight struct {
	conv, seq int64
	at        time.Time
}

func newSession(h *Hub, conn Conn, clientID string, userID int64, persistent, ready bool) *Session {
	return &Session{
		ClientID:   clientID,
		UserID:     userID,
		Persistent: persistent,
		hub:        h,
		conn:       conn,
		topic:      EventsTopic(userID),
		in:         make(chan item, h.opts.QueueSize),
		acks:       make(chan uint16, 4*h.opts.Window+64),
		resyncCh:   make(chan struct{}, 1),
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
		loaded:     make(chan struct{}),
		ready:      ready,
		started:    time.Now(),
		convs:      map[int64]*convState{},
		inflight:   map[uint16]inflight{},
		gapped:     map[int64]*convState{},
	}
}

// offer queues an item without blocking; on overflow the session drops its
// queue and catches up from PostgreSQL.
func (s *Session) offer(it item) {
	select {
	case s.in <- it:
	default:
		if it.kind == kJoin || it.kind == kLeave || it.kind == kReady || it.kind == kUnready {
			// Membership and readiness must not be lost: resync rereads them.
			s.resync()
			return
		}
		if !s.overflow.Swap(true) {
			s.hub.opts.Metrics.Overflows.Inc()
		}
		s.resync()
	}
}

func (s *Session) ack(id uint16) {
	select {
	case s.acks <- id:
	default: // more acks than publishes: a broken or hostile client
	}
}

// resyncUnseen is resync after the hub dropped events before its recent
// cache saw them: catch-up must then ask PostgreSQL, not the cache.
func (s *Session) resyncUnseen() {
	s.unseen.Store(true)
	s.resync()
}

func (s *Session) resync() {
	select {
	case s.resyncCh <- struct{}{}:
	default:
	}
}

// Loaded is closed once the session has read its starting positions from
// PostgreSQL: events committed after that are delivered.
func (s *Session) Loaded() <-chan struct{} { return s.loaded }

// Done is closed when the pump has stopped.
func (s *Session) Done() <-chan struct{} { return s.done }

func (s *Session) stopAndWait(ctx context.Context) {
	s.stopOnce.Do(func() { close(s.stopCh) })
	select {
	case <-s.done:
	case <-ctx.Done():
	}
}

func (s *Session) run() {
	defer close(s.done)
	defer s.hub.remove(s)
	log := s.hub.opts.Logger.With("client", s.ClientID, "user", s.UserID)
	if !s.load() {
		return
	}
	close(s.loaded)
	// The timer runs fast only while some conversation holds out-of-order
	// events (gap timeouts need GapWait resolution); otherwise it only
	// checks for a silent client, once a second.
	slow := time.Second
	fast := max(s.hub.opts.GapWait/4, time.Millisecond)
	tick := time.NewTimer(slow)
	defer tick.Stop()
	tickFast := false
	for {
		if len(s.gapped) > 0 && !tickFast {
			tick.Reset(fast)
			tickFast = true
		}
		if !s.pump() {
			log.Debug("delivery stopped: write failed")
			s.finish()
			return
		}
		select {
		case <-s.stopCh:
			s.finish()
			return
		case it := <-s.in:
			s.accept(it)
			s.drainIn()
			s.noteFull()
			s.drainAcks()
		case id := <-s.acks:
			// Items that came with the PUBACKs count as waiting before
			// the window opened (noteFull), whichever arrived first.
			s.drainIn()
			s.noteFull()
			s.onAck(id)
			s.drainAcks()
		case <-s.resyncCh:
			s.doResync()
		case now := <-tick.C:
			tickFast = len(s.gapped) > 0
			if tickFast {
				tick.Reset(fast)
			} else {
				tick.Reset(slow)
			}
			if !s.tick(now) {
				log.Warn("disconnecting slow consumer: no acknowledgements")
				s.conn.Close("slow consumer: no acknowledgements")
				s.finish()
				return
			}
		}
	}
}

// noteFull marks a full window with items waiting as fallen behind, as
// pump does when the window fills while items wait: items that arrive
// after it filled must not be released one per PUBACK either.
func (s *Session) noteFull() {
	if len(s.pending) > 0 && len(s.inflight) >= s.hub.opts.Window {
		s.windowFull = true
	}
}

func (s *Session) drainIn() {
	for i := 0; i < 256; i++ {
		select {
		case it := <-s.in:
			s.accept(it)
		default:
			return
		}
	}
}

// drainAcks takes every PUBACK already waiting: the window then refills
// with one write for the lot instead of one write per acknowledgement.
func (s *Session) drainAcks() {
	for i := 0; i < 4*s.hub.opts.Window; i++ {
		select {
		case id := <-s.acks:
			s.onAck(id)
		default:
			return
		}
	}
}

// load reads the starting cursors, retrying while the database is away.
func (s *Session) load() bool {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(s.hub.ctx, 10*time.Second)
		cs, err := s.hub.store.Cursors(ctx, s.ClientID, s.UserID, s.Persistent)
		cancel()
		if err == nil {
			for _, c := range cs {
				s.convs[c.ConversationID] = s.newConv(c)
			}
			return true
		}
		s.hub.opts.Logger.Warn("load delivery cursors failed; retrying", "client", s.ClientID, "err", err)
		select {
		case <-s.stopCh:
			return false
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (s *Session) finish() {
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
	case kDirect:
		s.pending = append(s.pending, it)
	case kEvent:
		if s.ready && len(s.pending) < s.hub.opts.QueueSize {
			s.pending = append(s.pending, it)
		}
	case kJoin:
		if _, ok := s.convs[it.conv]; !ok {
			// Check PostgreSQL once: a message may have been routed
			// before this join reached us.
			s.convs[it.conv] = &convState{next: it.seq + 1, behind: true, verify: true, saved: it.seq, sentHigh: it.seq}
		}
	case kLeave:
		delete(s.convs, it.conv)
		kept := s.pending[:0]
		for _, p := range s.pending {
			if p.kind == kMsg && p.conv == it.conv {
				continue
			}
			kept = append(kept, p)
		}
		s.pending = kept
	case kMsg:
		cs := s.convs[it.conv]
		if cs == nil {
			// Routed to us before the join event: start at this seq and
			// let the gap logic fill anything earlier when the join lands.
			cs = &convState{next: it.seq, saved: it.seq - 1, sentHigh: it.seq - 1}
			s.convs[it.conv] = cs
		}
		switch {
		case it.seq < cs.next:
			// duplicate
		case cs.behind:
			// PostgreSQL catch-up will return it in order.
		case it.seq == cs.next:
			if !s.ready || len(s.pending) >= s.hub.opts.QueueSize {
				cs.behind, cs.until = true, max(cs.until, it.seq)
				return
			}
			s.pending = append(s.pending, it)
			cs.next++
			s.releaseHeld(cs)
		default:
			if cs.held == nil {
				cs.held = map[int64]item{}
			}
			if len(cs.held) >= 256 {
				cs.until = max(cs.until, it.seq, maxHeld(cs.held))
				cs.behind, cs.held, cs.gapSince = true, nil, time.Time{}
				return
			}
			cs.held[it.seq] = it
			if cs.gapSince.IsZero() {
				cs.gapSince = time.Now()
				s.gapped[it.conv] = cs
			}
		}
	}
}

func (s *Session) releaseHeld(cs *convState) {
	for len(cs.held) > 0 {
		it, ok := cs.held[cs.next]
		if !ok {
			break
		}
		delete(cs.held, cs.next)
		s.pending = append(s.pending, it)
		cs.next++
	}
	for seq := range cs.held {
		if seq < cs.next {
			delete(cs.held, seq)
		}
	}
	if len(cs.held) == 0 {
		cs.gapSince = time.Time{}
	}
}

// pump sends pending items while the window allows and refills pending from
// PostgreSQL for conversations that are behind. It returns false when the
// connection is gone.
func (s *Session) pump() bool {
	for {
		// Everything the window allows goes out in one write: one syscall
		// for a burst instead of one per message.
		window := s.hub.opts.Window
		if s.windowFull {
			// The client fell a full window behind; refill in bursts of a
			// quarter window rather than one packet per PUBACK, which on a
			// busy server costs a system call per delivery.
			if len(s.inflight) > window-max(1, window/4) && len(s.inflight) > 0 {
				return true
			}
			s.windowFull = false
		}
		batch := s.outBatch[:0]
		for len(s.pending) > 0 && len(s.inflight) < window {
			it := s.pending[0]
			s.pending[0] = item{}
			s.pending = s.pending[1:]
			batch = append(batch, s.prepare(it))
		}
		s.outBatch = batch
		if len(batch) > 0 && !s.write(batch) {
			return false
		}
		if len(s.inflight) >= window {
			s.windowFull = len(s.pending) > 0 || s.anyBehind()
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

// fill queues the next messages of conversations that are behind, from
// the hub's recent cache when it holds them and otherwise from PostgreSQL;
// it reports whether it queued anything.
func (s *Session) fill() bool {
	if time.Now().Before(s.fillWait) {
		return false
	}
	// Queued anything: fetched messages, or held ones a caught-up
	// conversation released (even when the fetch itself found nothing).
	before := len(s.pending)
	return s.fillFrom() || len(s.pending) > before
}

func (s *Session) fillFrom() bool {
	// Lowest id first: deterministic, and every behind conversation gets
	// its turn because a caught-up one stops being behind.
	behind := s.fillIDs[:0]
	for id, cs := range s.convs {
		if cs.behind {
			behind = append(behind, id)
		}
	}
	slices.Sort(behind)
	s.fillIDs = behind
	ids := make([]int64, 0, len(behind))
	queued := false
	for _, id := range behind {
		cs := s.convs[id]
		if !cs.verify && s.fillRecent(id, cs) {
			queued = true
			continue
		}
		if cs.behind {
			ids = append(ids, id)
		}
	}
	if queued || len(ids) == 0 {
		return queued
	}
	// One query for up to 64 conversations; each gets an equal share of a
	// budget of two windows (at least 16 messages, at most FetchLimit).
	if len(ids) > 64 {
		ids = ids[:64]
	}
	limit := min(s.hub.opts.FetchLimit, max(16, 2*s.hub.opts.Window/len(ids)))
	ranges := make([]store.Range, len(ids))
	for i, id := range ids {
		ranges[i] = store.Range{ConversationID: id, After: s.convs[id].next - 1}
	}
	ctx, cancel := context.WithTimeout(s.hub.ctx, 10*time.Second)
	got, err := s.hub.store.SinceMany(ctx, ranges, limit)
	cancel()
	if err != nil {
		s.hub.opts.Logger.Warn("catch-up read failed; retrying", "client", s.ClientID, "conversations", len(ids), "err", err)
		s.fillWait = time.Now().Add(500 * time.Millisecond)
		return false
	}
	for _, id := range ids {
		cs := s.convs[id]
		cs.verify = false
		msgs := got[id]
		for _, m := range msgs {
			if m.Seq != cs.next {
				break // cannot happen with gapless seqs; stay safe
			}
			it := item{kind: kMsg, conv: id, seq: m.Seq, payload: encodeMessage(m, cs.large), qos: 1}
			if m.CreatedAt.After(s.started) {
				// Committed while this session was online: the latency
				// metric counts it (a catch-up after time offline does not).
				it.at = m.CreatedAt
			}
			s.pending = append(s.pending, it)
			cs.next++
			queued = true
		}
		s.hub.opts.Metrics.Replayed.Add(float64(len(msgs)))
		if len(msgs) < limit {
			cs.behind = false
			s.releaseHeld(cs)
		}
	}
	return queued
}

// fillRecent queues what the hub's recent cache holds from cs.next on; it
// reports whether it queued anything. When that reaches both the newest
// message the fan-out has seen and the newest this session knows to be
// committed (cs.until), the conversation is caught up: anything later is
// still to be routed to this session live. Otherwise PostgreSQL decides.
func (s *Session) fillRecent(id int64, cs *convState) bool {
	got, complete := s.hub.recent.get(s.recentBuf[:0], id, cs.next, s.hub.opts.FetchLimit, cs.large)
	s.recentBuf = got
	for _, e := range got {
		it := item{kind: kMsg, conv: id, seq: cs.next, payload: e.payload, qos: 1}
		if e.at.After(s.started) {
			it.at = e.at
		}
		s.pending = append(s.pending, it)
		cs.next++
	}
	clear(got)
	s.hub.opts.Metrics.RecentHits.Add(float64(len(got)))
	if complete && cs.next > cs.until {
		cs.behind = false
		s.releaseHeld(cs)
	}
	return len(got) > 0
}

func maxHeld(held map[int64]item) int64 {
	var m int64
	for seq := range held {
		m = max(m, seq)
	}
	return m
}

func (s *Session) anyBehind() bool {
	for _, cs := range s.convs {
		if cs.behind {
			return true
		}
	}
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
func (s *Session) prepare(it item) Packet {
	p := Packet{Topic: it.topic, Payload: it.payload, QoS: it.qos, CorrelationData: it.corr}
	if p.Topic == "" {
		p.Topic = s.topic
	}
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
	if len(s.inflight) == 0 {
		s.lastAck = now
	}
	inf := inflight{at: now}
	if it.kind == kMsg {
		inf.conv, inf.seq = it.conv, it.seq
		if cs := s.convs[it.conv]; cs != nil {
			cs.unacked = append(cs.unacked, it.seq)
			if it.seq > cs.sentHigh {
				cs.sentHigh = it.seq
			}
		}
	}
	s.inflight[p.PacketID] = inf
	return p
}

func (s *Session) write(batch []Packet) bool {
	s.writingSince.Store(time.Now().UnixNano())
	err := s.conn.WritePublishes(batch)
	s.writingSince.Store(0)
	clear(batch)
	return err == nil
}

func (s *Session) onAck(id uint16) {
	inf, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	s.lastAck = time.Now()
	if inf.seq == 0 {
		return
	}
	s.hub.opts.Metrics.Acked.Inc()
	cs := s.convs[inf.conv]
	if cs == nil {
		return
	}
	for i, q := range cs.unacked {
		if q == inf.seq {
			cs.unacked = append(cs.unacked[:i], cs.unacked[i+1:]...)
			break
		}
	}
	if d := s.hub.opts.Delivered; d != nil {
		d.Delivered(inf.conv, s.UserID, inf.seq)
	}
	cursor := cs.sentHigh
	if len(cs.unacked) > 0 {
		cursor = cs.unacked[0] - 1
	}
	if cursor > cs.saved {
		cs.saved = cursor
		if s.Persistent {
			s.hub.cursors.save(store.Cursor{ClientID: s.ClientID, ConversationID: inf.conv, Seq: cursor})
		}
	}
}

// tick handles gap timeouts and detects a client that stopped acknowledging.
func (s *Session) tick(now time.Time) bool {
	for id, cs := range s.gapped {
		if cs.gapSince.IsZero() || s.convs[id] != cs {
			delete(s.gapped, id)
			continue
		}
		if now.Sub(cs.gapSince) > s.hub.opts.GapWait {
			cs.until = max(cs.until, maxHeld(cs.held))
			cs.behind, cs.held, cs.gapSince = true, nil, time.Time{}
			delete(s.gapped, id)
		}
	}
	if (len(s.inflight) >= s.hub.opts.Window || s.windowFull) && len(s.inflight) > 0 && now.Sub(s.lastAck) > s.hub.opts.SlowTimeout {
		s.hub.opts.Metrics.SlowDisconnect.Inc()
		return false
	}
	return true
}

// doResync drops queued live events and re-reads membership and positions
// from PostgreSQL; what was dropped is then read back in order.
func (s *Session) doResync() {
	for {
		select {
		case it := <-s.in:
			if it.kind == kReady || it.kind == kUnready || it.kind == kDirect {
				s.accept(it)
			}
			continue
		default:
		}
		break
	}
	s.overflow.Store(false)
	unseen := s.unseen.Swap(false)
	ctx, cancel := context.WithTimeout(s.hub.ctx, 10*time.Second)
	cs, err := s.hub.store.Cursors(ctx, s.ClientID, s.UserID, s.Persistent)
	cancel()
	if err != nil {
		if unseen {
			s.unseen.Store(true)
		}
		s.hub.opts.Logger.Warn("resync failed; retrying", "client", s.ClientID, "err", err)
		go func() { time.Sleep(500 * time.Millisecond); s.resync() }()
		return
	}
	seen := map[int64]bool{}
	for _, c := range cs {
		seen[c.ConversationID] = true
		st := s.convs[c.ConversationID]
		if st == nil {
			st = s.newConv(c)
			st.verify = st.behind
			s.convs[c.ConversationID] = st
			continue
		}
		st.held, st.gapSince = nil, time.Time{}
		st.behind = c.LastSeq >= st.next
		// Events this session dropped itself went through the recent
		// cache first; events the hub dropped did not.
		st.verify, st.until = st.behind && unseen, max(st.until, c.LastSeq)
		st.large = c.MemberCount > s.hub.opts.LargeGroup
	}
	for id := range s.convs {
		if !seen[id] {
			delete(s.convs, id)
		}
	}
}

func (s *Session) saveCursors() {
	if !s.Persistent {
		return
	}
	for id, cs := range s.convs {
		cursor := cs.sentHigh
		if len(cs.unacked) > 0 {
			cursor = cs.unacked[0] - 1
		}
		if cursor > cs.saved {
			cs.saved = cursor
			s.hub.cursors.save(store.Cursor{ClientID: s.ClientID, ConversationID: id, Seq: cursor})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.hub.cursors.flushNow(ctx)
	cancel()
}

func (s *Session) newConv(c store.ConvCursor) *convState {
	return &convState{next: c.Delivered + 1, behind: c.LastSeq > c.Delivered, until: c.LastSeq, saved: c.Delivered,
		sentHigh: c.Delivered, large: c.MemberCount > s.hub.opts.LargeGroup}
}
