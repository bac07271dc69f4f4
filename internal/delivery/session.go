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

// Session is one connected client's delivery pump: the only goroutine that
// writes to the client. It owns every field below the channels; other
// goroutines reach it through offer, ack, reply and resync, none of which
// block.
type Session struct {
	ClientID   string
	UserID     int64
	Persistent bool

	hub          *Hub
	conn         chat.Conn
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

	// Acknowledgements of the client's own publishes (Reply), in order;
	// never dropped: there are at most as many as the client may have
	// publishes in flight.
	replyMu  sync.Mutex
	replies  []chat.Ack
	replyCh  chan struct{}
	replyOut []chat.Ack

	ready      bool
	streams    map[int64]*stream
	inflight   map[uint16]inflight
	pending    []item
	outBatch   []chat.Packet
	gapped     map[int64]*stream // streams holding out-of-order events
	nextID     uint16
	lastAck    time.Time
	fillWait   time.Time // after a failed catch-up query, when to try again
	fillIDs    []int64
	windowFull bool // the window filled with more to send: refill in bursts
	catchUp    catchUp
}

type inflight struct {
	conv, seq int64
	at        time.Time
}

func newSession(h *Hub, conn chat.Conn, clientID string, userID int64, persistent, ready bool) *Session {
	s := &Session{
		ClientID:   clientID,
		UserID:     userID,
		Persistent: persistent,
		hub:        h,
		conn:       conn,
		in:         make(chan item, h.opts.QueueSize),
		acks:       make(chan uint16, 4*h.opts.Window+64),
		resyncCh:   make(chan struct{}, 1),
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
		loaded:     make(chan struct{}),
		replyCh:    make(chan struct{}, 1),
		ready:      ready,
		started:    time.Now(),
		streams:    map[int64]*stream{},
		inflight:   map[uint16]inflight{},
		gapped:     map[int64]*stream{},
	}
	s.catchUp = newCatchUp(h)
	return s
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

// errAckNotWritten is what an acknowledgement's Sent hears when its
// connection closed before it could be written.
var errAckNotWritten = errors.New("connection closed before the acknowledgement was written")

// reply queues acknowledgements of the client's publishes, in order.
func (s *Session) reply(acks []chat.Ack) {
	s.replyMu.Lock()
	s.replies = append(s.replies, acks...)
	s.replyMu.Unlock()
	select {
	case s.replyCh <- struct{}{}:
	default:
	}
}

// takeReplies moves the waiting acknowledgements to replyOut.
func (s *Session) takeReplies() {
	s.replyMu.Lock()
	s.replyOut = append(s.replyOut, s.replies...)
	clear(s.replies)
	s.replies = s.replies[:0]
	s.replyMu.Unlock()
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
	// The timer runs fast only while some stream holds out-of-order
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
		case <-s.replyCh:
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
				s.streams[c.ConversationID] = newStream(c.Delivered, c.LastSeq, c.MemberCount > s.hub.opts.LargeGroup)
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

// finish writes the acknowledgements still waiting (a stopping server
// answers every publish it committed) and saves the cursors.
func (s *Session) finish() {
	s.takeReplies()
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
	case kDirect:
		s.pending = append(s.pending, it)
	case kEvent:
		if s.ready && len(s.pending) < s.hub.opts.QueueSize {
			s.pending = append(s.pending, it)
		}
	case kJoin:
		if _, ok := s.streams[it.conv]; !ok {
			s.streams[it.conv] = joinedStream(it.seq)
		}
	case kLeave:
		delete(s.streams, it.conv)
		delete(s.gapped, it.conv)
		s.pending = slices.DeleteFunc(s.pending, func(p item) bool { return p.kind == kMsg && p.conv == it.conv })
	case kMsg:
		st := s.streams[it.conv]
		if st == nil {
			st = firstSeenStream(it.seq)
			s.streams[it.conv] = st
		}
		room := s.ready && len(s.pending) < s.hub.opts.QueueSize
		s.pending = append(s.pending, st.offer(it, room, time.Now())...)
		if st.state == Gapped {
			s.gapped[it.conv] = st
		}
	}
}

// pump sends pending items while the window allows and refills pending
// from the catch-up sources for streams that are behind. It returns false
// when the connection is gone.
func (s *Session) pump() bool {
	s.takeReplies()
	for {
		// Everything the window allows goes out in one write: one syscall
		// for a burst instead of one per message.
		window := s.hub.opts.Window
		if s.windowFull {
			// The client fell a full window behind; refill in bursts of a
			// quarter window rather than one packet per PUBACK, which on a
			// busy server costs a system call per delivery.
			if len(s.inflight) > window-max(1, window/4) && len(s.inflight) > 0 {
				return s.flushReplies()
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
		if (len(batch) > 0 || len(s.replyOut) > 0) && !s.write(batch) {
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
	if time.Now().Before(s.fillWait) {
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
	for _, st := range s.streams {
		if st.state == Behind {
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
	if len(s.inflight) == 0 {
		s.lastAck = now
	}
	inf := inflight{at: now}
	if it.kind == kMsg {
		inf.conv, inf.seq = it.conv, it.seq
		if st := s.streams[it.conv]; st != nil {
			st.sent(it.seq)
		}
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
	for _, a := range s.replyOut[len(acks):] {
		if a.Sent != nil {
			a.Sent(errAckNotWritten) // the connection closes instead
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
	s.lastAck = time.Now()
	if inf.seq == 0 {
		return
	}
	s.hub.opts.Metrics.Acked.Inc()
	st := s.streams[inf.conv]
	if st == nil {
		return
	}
	if d := s.hub.opts.Delivered; d != nil {
		d.Delivered(inf.conv, s.UserID, inf.seq)
	}
	if cursor, moved := st.acked(inf.seq); moved && s.Persistent {
		s.hub.saveCursor(chat.Cursor{ClientID: s.ClientID, ConversationID: inf.conv, Seq: cursor})
	}
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
		time.AfterFunc(500*time.Millisecond, s.resync)
		return
	}
	seen := map[int64]bool{}
	for _, c := range cs {
		seen[c.ConversationID] = true
		large := c.MemberCount > s.hub.opts.LargeGroup
		st := s.streams[c.ConversationID]
		if st == nil {
			st = newStream(c.Delivered, c.LastSeq, large)
			st.verify = st.state == Behind
			s.streams[c.ConversationID] = st
			continue
		}
		// Events this session dropped itself went through the recent
		// cache first; events the hub dropped did not.
		st.resync(c.LastSeq, unseen, large)
		delete(s.gapped, c.ConversationID)
	}
	for id := range s.streams {
		if !seen[id] {
			delete(s.streams, id)
			delete(s.gapped, id)
		}
	}
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
