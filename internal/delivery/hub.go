package delivery

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/coalesce"
	"github.com/chatd/chatd/internal/shrink"
	"github.com/chatd/chatd/internal/shutdown"
)

// Hub routes committed events to the sessions connected to this node.
type Hub struct {
	opts  Options
	store chat.DeliveryStore

	events   chan chat.Event
	overflow atomic.Bool
	// closing: Close is stopping the sessions; the watchdog then ends a
	// blocked write after closeWriteGrace, not SlowTimeout.
	closing atomic.Bool

	mu       sync.RWMutex
	byClient map[string]*Session
	// byUser: a user's sessions, one for most users; a slice of them
	// is a word each where a set was a map of its own (~130 bytes), and
	// this is per connection.
	byUser map[int64][]*Session
	// the most entries each held since it was last copied (shrink.Map)
	byClientPeak, byUserPeak int

	// members is owned by the fan-out goroutine.
	members *memberIndex
	// unsettled counts, per conversation, the writes that may change its
	// members whose outcome the store has not learnt (Unsettled); the
	// fan-out reads its members again for each of its events meanwhile.
	// unsettledN is how many conversations it holds, read without the
	// lock on every event.
	unsettledMu sync.Mutex
	unsettled   map[int64]int
	unsettledN  atomic.Int64

	cursors      *coalesce.Map[cursorKey, int64]
	cursorWriter *coalesce.Writer[cursorKey, int64]
	recent       *recent

	// pumps hands a session with work to an idle pump worker (unbuffered:
	// a hand-off happens only when one is waiting; see Session.wakeLocked).
	pumps chan *Session

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ chat.Publisher          = (*Hub)(nil)
	_ chat.UnsettledPublisher = (*Hub)(nil)
	_ chat.Delivery           = (*Hub)(nil)
)

type cursorKey struct {
	client string
	conv   int64
}

// memberLoaders is how many member lookups run at once for the fan-out.
const memberLoaders = 4

// pumpWorkers is how many goroutines wait to run sessions' pumps. A pump
// runs only while its session has work, and a goroutine started for each
// run begins with the runtime's smallest stack (chatd turns the runtime's
// adaptive starting size off, see cmd/chatd) and grows it by copying on
// every run, a cost per message; the workers keep the stack they grew
// (docs/benchmarks.md, Efficiency, item 14). When none is idle a run gets
// a goroutine of its own, so no session waits behind another's (a pump
// can block on a slow client's write).
const pumpWorkers = 16

// NewHub starts the hub's fan-out, member loaders, cursor writer and
// watchdog; stop them with Close.
func NewHub(st chat.DeliveryStore, opts Options) *Hub {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{
		opts:      opts,
		store:     st,
		events:    make(chan chat.Event, opts.HubQueue),
		byClient:  map[string]*Session{},
		byUser:    map[int64][]*Session{},
		members:   newMemberIndex(opts.MemberIndexSize),
		unsettled: map[int64]int{},
		pumps:     make(chan *Session),
		ctx:       ctx,
		cancel:    cancel,
	}
	// A lost cursor update would only mean duplicates after a reconnect;
	// bounded all the same.
	h.cursors = coalesce.NewMap[cursorKey, int64](coalesce.Max[int64], 1<<20)
	h.cursorWriter = coalesce.NewWriter(h.cursors, coalesce.WriterConfig[cursorKey, int64]{
		Flush:    h.writeCursors,
		Interval: opts.CursorFlush,
		MaxBatch: 4096,
		Timeout:  5 * time.Second,
		OnError: func(err error, n int) {
			opts.Metrics.CursorErrors.Inc()
			opts.Logger.Warn("flush delivered cursors failed; will retry", "count", n, "err", err)
		},
	})
	h.recent = newRecent(opts.RecentPerConv, opts.RecentBytes)
	h.wg.Add(2 + pumpWorkers)
	go func() { defer h.wg.Done(); h.fanout() }()
	go func() { defer h.wg.Done(); h.watchdog() }()
	for range pumpWorkers {
		go func() { defer h.wg.Done(); h.pumpWorker() }()
	}
	return h
}

// pumpWorker runs the pumps handed to it until the hub closes.
func (h *Hub) pumpWorker() {
	for {
		select {
		case s := <-h.pumps:
			s.run()
		case <-h.ctx.Done():
			return
		}
	}
}

// Publish queues committed (and ephemeral) events for fan-out to this
// node's sessions, then hands the stored ones to Options.Next (the outbox
// relay's wake-up). It never blocks: when the queue is full every session
// falls back to PostgreSQL, which has the events (chat.Publisher).
func (h *Hub) Publish(evs ...chat.Event) {
	stored := false
	for _, ev := range evs {
		h.Deliver(ev)
		stored = stored || !ev.Ephemeral()
	}
	if stored && h.opts.Next != nil {
		h.opts.Next.Publish(evs...)
	}
}

// Deliver queues one event for fan-out to this node's sessions only: what
// another node committed (Kafka) or published. It never blocks.
func (h *Hub) Deliver(ev chat.Event) {
	select {
	case h.events <- ev:
	default:
		if !ev.IsEntry() {
			h.opts.Metrics.EventsDropped.Inc()
		}
		if !h.overflow.Swap(true) {
			h.opts.Metrics.Overflows.Inc()
			h.opts.Logger.Warn("delivery hub queue full; sessions will catch up from PostgreSQL")
		}
	}
}

// eventSettled is the fan-out's own event that ends an Unsettled of its
// conversation: it comes through the queue, after the events published
// before Settled, which are routed by members read after them.
const eventSettled = "delivery.settled"

// Unsettled: a write that may change the members of these conversations
// has an outcome not known yet (chat.UnsettledPublisher). From now on,
// until the matching Settled, each of their events waits for a read of
// the members made after it arrived, so it is routed by members as of its
// commit or later: a removal that committed after the last read (the
// write was in progress, or its answer lost) takes the member out before
// the entries committed after it reach them, a join puts the member in.
// It never blocks.
func (h *Hub) Unsettled(ids ...int64) {
	h.unsettledMu.Lock()
	defer h.unsettledMu.Unlock()
	for _, id := range ids {
		if h.unsettled[id] == 0 {
			h.unsettledN.Add(1)
			h.opts.Metrics.Unsettled.Inc()
		}
		h.unsettled[id]++
	}
}

// Settled ends one Unsettled of each conversation once the fan-out has
// routed what was published before it. It never blocks: with the queue
// full, a goroutine queues the end once there is room (until the hub
// closes), behind what was queued before, so that the conversation does
// not stay unsettled for good.
func (h *Hub) Settled(ids ...int64) {
	for i, id := range ids {
		select {
		case h.events <- chat.Event{Type: eventSettled, ConversationID: id}:
		default:
			rest := slices.Clone(ids[i:])
			go func() {
				for _, id := range rest {
					select {
					case h.events <- chat.Event{Type: eventSettled, ConversationID: id}:
					case <-h.ctx.Done():
						return
					}
				}
			}()
			return
		}
	}
}

// isUnsettled reports whether conv's members must be read again for each
// event (Unsettled).
func (h *Hub) isUnsettled(conv int64) bool {
	if h.unsettledN.Load() == 0 {
		return false
	}
	h.unsettledMu.Lock()
	defer h.unsettledMu.Unlock()
	return h.unsettled[conv] > 0
}

// settle ends one Unsettled of conv, on the fan-out goroutine.
func (h *Hub) settle(conv int64) {
	h.unsettledMu.Lock()
	defer h.unsettledMu.Unlock()
	switch n := h.unsettled[conv]; {
	case n > 1:
		h.unsettled[conv] = n - 1
	case n == 1:
		delete(h.unsettled, conv)
		h.unsettledN.Add(-1)
		h.opts.Metrics.Unsettled.Dec()
	}
}

// Resync makes every session re-read its positions from PostgreSQL, and
// the fan-out the members of every conversation, as after an overflow:
// for events that never reached Deliver (this node's Kafka consumer
// started reading after some were relayed). It never blocks; the fan-out
// does it within a second.
func (h *Hub) Resync() { h.overflow.Store(true) }

// ErrClosed is what Attach answers once Close began: the node is shutting
// down and delivers to no new session; its client should connect again
// (to another node). It is chat.ErrUnavailable for errors.Is.
var ErrClosed = chat.Errorf(chat.CodeUnavailable, "delivery is closed: the server is shutting down")

// closeWriteGrace is how long, once Close began, a session's write may stay
// blocked before the watchdog closes its connection: a client whose socket
// takes nothing (a dead peer) must not keep its session from stopping for
// SlowTimeout, longer than a whole graceful shutdown is given.
const closeWriteGrace = time.Second

// Close stops all sessions (flushing their cursors), the hub goroutines
// and the cursor writer. A session whose write stays blocked has its
// connection closed after closeWriteGrace, so that it stops too.
func (h *Hub) Close(ctx context.Context) error {
	// Under the lock Attach takes: a session attached from now on is
	// refused, one attached before is among those stopped here (a later
	// one would outlive Close, reading with the cancelled context for
	// ever, its cursors never flushed).
	h.mu.Lock()
	h.closing.Store(true)
	h.mu.Unlock()
	for _, s := range h.allSessions() {
		s.stopAndWait(ctx)
	}
	h.cancel()
	if err := shutdown.Wait(ctx, &h.wg); err != nil {
		return err
	}
	return h.cursorWriter.Close(ctx)
}

// Attach starts delivery for a connected client. A session already running
// under clientID (a takeover) is stopped first, and its cursors flushed, so
// the new one resumes exactly where the old one stopped. The session's
// window is Options.Window, or the client's receiveMaximum when that is
// smaller (and above 0): MQTT 5 forbids sending a client more
// unacknowledged QoS 1 publishes than it asked for [MQTT-3.3.4-9].
//
// The new session takes clientID's place at once, in one step with
// finding the session it replaces: of two connections of one client id
// attaching at the same instant, the later attach's session stays and
// stops the other, which would otherwise stay routed the user's events
// (and count as online) until a write of its failed. The new session's
// pump is held, offers only queue, until the one it replaced has stopped.
//
// Once Close began, Attach starts nothing and returns ErrClosed.
func (h *Hub) Attach(conn chat.Conn, clientID string, userID int64, persistent, ready bool, receiveMaximum int) error {
	s := newSession(h, conn, clientID, userID, persistent, ready)
	s.window = h.opts.Window
	if receiveMaximum > 0 {
		s.window = min(s.window, receiveMaximum)
	}
	s.readyFlag.Store(ready)
	s.running = true // held: see below
	h.mu.Lock()
	if h.closing.Load() {
		h.mu.Unlock()
		return ErrClosed
	}
	old := h.byClient[clientID]
	h.byClient[clientID] = s
	h.byUser[userID] = append(h.byUser[userID], s)
	h.mu.Unlock()
	h.opts.Metrics.Sessions.Inc()
	if old != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		old.stopAndWait(ctx)
		cancel()
	}
	s.mu.Lock()
	s.running = false
	s.wakeLocked() // loads the starting positions
	s.mu.Unlock()
	return nil
}

func (h *Hub) remove(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byClient[s.ClientID] == s {
		delete(h.byClient, s.ClientID)
	}
	if set := h.byUser[s.UserID]; set != nil {
		if i := slices.Index(set, s); i >= 0 {
			set = slices.Delete(set, i, i+1)
			h.opts.Metrics.Sessions.Dec()
		}
		if len(set) == 0 {
			delete(h.byUser, s.UserID)
		} else {
			h.byUser[s.UserID] = set
		}
	}
	h.byClient = shrink.Map(h.byClient, &h.byClientPeak)
	h.byUser = shrink.Map(h.byUser, &h.byUserPeak)
}

// Detach stops the session of clientID if conn still owns it.
func (h *Hub) Detach(clientID string, conn chat.Conn) {
	if s := h.Session(clientID); s != nil && s.conn == conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.stopAndWait(ctx)
		cancel()
	}
}

// Session returns the running session of clientID, if any.
func (h *Hub) Session(clientID string) *Session {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.byClient[clientID]
}

// Ready reports whether clientID's session is delivering events (the
// client is subscribed to its events topic).
func (h *Hub) Ready(clientID string) bool {
	s := h.Session(clientID)
	return s != nil && s.readyFlag.Load()
}

// Online reports whether userID has a session on this node.
func (h *Hub) Online(userID int64) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.byUser[userID]) > 0
}

// ClientIDs lists the connected client ids.
func (h *Hub) ClientIDs() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.byClient))
	for id := range h.byClient {
		out = append(out, id)
	}
	return out
}

func (h *Hub) allSessions() []*Session {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Session, 0, len(h.byClient))
	for _, s := range h.byClient {
		out = append(out, s)
	}
	return out
}

// SendDirect queues a publish for the connection conn only (RPC replies,
// error events), if it still owns clientID's session; it is sent even
// before the client subscribed to its events topic. It reports false when
// it does not (see chat.Delivery).
func (h *Hub) SendDirect(clientID string, conn chat.Conn, p chat.Packet) bool {
	s := h.Session(clientID)
	if s == nil || s.conn != conn {
		return false
	}
	s.offer(item{kind: kDirect, topic: p.Topic, payload: p.Payload, qos: p.QoS, corr: p.CorrelationData})
	return true
}

// After queues fn to run once what conn's session queued before it was
// written (see chat.Delivery).
func (h *Hub) After(clientID string, conn chat.Conn, fn func()) bool {
	s := h.Session(clientID)
	if s == nil || s.conn != conn {
		return false
	}
	s.offer(item{kind: kAfter, after: fn})
	return true
}

// Reply queues acknowledgements of the client's own publishes on the
// session conn owns; they go out in order, before its next deliveries, and
// are never dropped. Without such a session the connection is gone and so
// is the need to answer.
func (h *Hub) Reply(clientID string, conn chat.Conn, acks []chat.Ack) {
	if s := h.Session(clientID); s != nil && s.conn == conn {
		s.reply(acks)
		return
	}
	notWritten(acks)
}

// SetReady tells clientID's session, if conn still owns it, whether the
// client is subscribed to its events topic; events are held until it is.
func (h *Hub) SetReady(clientID string, conn chat.Conn, ready bool) {
	if s := h.Session(clientID); s != nil && s.conn == conn {
		k := kReady
		if !ready {
			k = kUnready
		}
		s.offer(item{kind: k})
	}
}

// Acked hands a PUBACK from clientID to its session if conn still owns it:
// after a takeover the old connection's PUBACKs answer the old session's
// packet ids, which the new session reuses for other deliveries.
func (h *Hub) Acked(clientID string, conn chat.Conn, packetID uint16) {
	if s := h.Session(clientID); s != nil && s.conn == conn {
		s.ack(packetID)
	}
}

// saveCursor queues a delivered cursor for the cursor writer.
func (h *Hub) saveCursor(c chat.Cursor) {
	h.cursors.Put(cursorKey{c.ClientID, c.ConversationID}, c.Seq)
}

// flushCursors writes every cursor queued before the call.
func (h *Hub) flushCursors(ctx context.Context) error { return h.cursorWriter.Flush(ctx) }

func (h *Hub) writeCursors(ctx context.Context, batch map[cursorKey]int64) error {
	cs := make([]chat.Cursor, 0, len(batch))
	for k, seq := range batch {
		cs = append(cs, chat.Cursor{ClientID: k.client, ConversationID: k.conv, Seq: seq})
	}
	return h.store.SaveCursors(ctx, cs)
}

// watchdog disconnects sessions whose write has been blocked too long: the
// pump cannot notice that itself while it is stuck in the write. Too long
// is SlowTimeout without progress: since the write began, or since the
// client's TCP last acknowledged more of what it was sent (a
// chat.AckedConn), so a client that reads steadily but slowly keeps its
// session however long the kernel holds one write back (internal/tcpacked)
// while one that takes nothing is still disconnected. While the hub
// closes, too long is closeWriteGrace from the write's start, progress or
// not: the shutdown must not wait on a slow client. It looks every
// SlowTimeout/4, at most every second.
func (h *Hub) watchdog() {
	t := time.NewTicker(min(time.Second, h.opts.SlowTimeout/4))
	defer t.Stop()
	blocked := map[*Session]*blockedWrite{}
	for tick := uint64(1); ; tick++ {
		select {
		case <-h.ctx.Done():
			return
		case now := <-t.C:
			closing := h.closing.Load()
			limit := h.opts.SlowTimeout
			if closing {
				limit = min(limit, closeWriteGrace)
			}
			for _, s := range h.allSessions() {
				since := s.writingSince.Load()
				if since == 0 {
					continue
				}
				w := blocked[s]
				if w == nil {
					w = &blockedWrite{}
					blocked[s] = w
				}
				w.look(s.conn, since, now, tick)
				from := w.progress
				if closing {
					from = time.Unix(0, since)
				}
				if now.Sub(from) > limit {
					h.opts.Metrics.SlowDisconnect.Inc()
					h.opts.Logger.Warn("disconnecting slow consumer: write blocked", "client", s.ClientID, "user", s.UserID,
						"blocked", now.Sub(time.Unix(0, since)).Round(time.Millisecond), "acked", w.acked)
					s.conn.Close("slow consumer: write blocked")
				}
			}
			for s, w := range blocked {
				if w.tick != tick {
					delete(blocked, s) // its write ended, or its session did
				}
			}
		}
	}
}

// blockedWrite is the watchdog's view of a session's write in progress.
type blockedWrite struct {
	since    int64     // the write's writingSince
	progress time.Time // when the write began, or when its client last acknowledged more
	acked    uint64    // what the client's TCP had acknowledged when last read
	known    bool      // the connection tells what its client acknowledged
	tick     uint64    // the watchdog's tick that saw the write last
}

// look updates w for the write that began at since (UnixNano) on conn.
func (w *blockedWrite) look(conn chat.Conn, since int64, now time.Time, tick uint64) {
	w.tick = tick
	ac, _ := conn.(chat.AckedConn)
	if w.since != since {
		*w = blockedWrite{since: since, progress: time.Unix(0, since), tick: tick}
		if ac != nil {
			w.acked, w.known = ac.Acked()
		}
		return
	}
	if !w.known {
		return
	}
	if a, ok := ac.Acked(); ok && a != w.acked {
		w.acked, w.progress = a, now
	}
}
