package delivery

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	chat "github.com/chatd/chatd"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Hub routes committed events to the sessions connected to this node.
type Hub struct {
	opts    Options
	store   Store
	members Members

	events   chan chat.Event
	overflow atomic.Bool

	mu       sync.RWMutex
	byClient map[string]*Session
	byUser   map[int64]map[*Session]struct{}

	// memberCache is owned by the fan-out goroutine.
	memberCache map[int64][]int64

	cursors *cursorWriter
	recent  *recent

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewHub starts the hub's fan-out, cursor writer and watchdog goroutines;
// stop them with Close.
func NewHub(st Store, members Members, opts Options) *Hub {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{
		opts:        opts,
		store:       st,
		members:     members,
		events:      make(chan chat.Event, opts.HubQueue),
		byClient:    map[string]*Session{},
		byUser:      map[int64]map[*Session]struct{}{},
		memberCache: map[int64][]int64{},
		ctx:         ctx,
		cancel:      cancel,
	}
	h.cursors = newCursorWriter(st, opts)
	h.recent = newRecent(opts.RecentPerConv, opts.RecentBytes)
	h.wg.Add(3)
	go func() { defer h.wg.Done(); h.fanout() }()
	go func() { defer h.wg.Done(); h.cursors.run(ctx) }()
	go func() { defer h.wg.Done(); h.watchdog() }()
	return h
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
		if !h.overflow.Swap(true) {
			h.opts.Metrics.Overflows.Inc()
			h.opts.Logger.Warn("delivery hub queue full; sessions will catch up from PostgreSQL")
		}
	}
}

// Close stops all sessions (flushing their cursors) and the hub goroutines.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	sessions := make([]*Session, 0, len(h.byClient))
	for _, s := range h.byClient {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	for _, s := range sessions {
		s.stopAndWait(ctx)
	}
	h.cancel()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Attach starts delivery for a connected client. A session already running
// under clientID (a takeover) is stopped first, and its cursors flushed, so
// the new one resumes exactly where the old one stopped.
func (h *Hub) Attach(conn Conn, clientID string, userID int64, persistent, ready bool) *Session {
	h.mu.Lock()
	old := h.byClient[clientID]
	h.mu.Unlock()
	if old != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		old.stopAndWait(ctx)
		cancel()
	}
	s := newSession(h, conn, clientID, userID, persistent, ready)
	s.readyFlag.Store(ready)
	h.mu.Lock()
	h.byClient[clientID] = s
	set := h.byUser[userID]
	if set == nil {
		set = map[*Session]struct{}{}
		h.byUser[userID] = set
	}
	set[s] = struct{}{}
	h.mu.Unlock()
	h.opts.Metrics.Sessions.Inc()
	go s.run()
	return s
}

func (h *Hub) remove(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byClient[s.ClientID] == s {
		delete(h.byClient, s.ClientID)
	}
	if set := h.byUser[s.UserID]; set != nil {
		if _, ok := set[s]; ok {
			delete(set, s)
			h.opts.Metrics.Sessions.Dec()
		}
		if len(set) == 0 {
			delete(h.byUser, s.UserID)
		}
	}
}

// Detach stops the session of clientID if conn still owns it.
func (h *Hub) Detach(clientID string, conn Conn) {
	h.mu.RLock()
	s := h.byClient[clientID]
	h.mu.RUnlock()
	if s != nil && s.conn == conn {
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

func (h *Hub) sessionsOf(userID int64) []*Session {
	h.mu.RLock()
	defer h.mu.RUnlock()
	set := h.byUser[userID]
	out := make([]*Session, 0, len(set))
	for s := range set {
		out = append(out, s)
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

// fanout is the single goroutine that routes events; it owns memberCache.
// After the queue overflowed (events were dropped) every session resyncs
// from PostgreSQL: at the next event, or within a second if none comes.
func (h *Hub) fanout() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
			if h.overflow.Swap(false) {
				h.resyncAll()
			}
		case ev := <-h.events:
			if h.overflow.Swap(false) {
				h.resyncAll()
			}
			h.route(ev)
		}
	}
}

func (h *Hub) resyncAll() {
	for _, s := range h.allSessions() {
		s.resyncUnseen()
	}
}

func (h *Hub) membersOf(conv int64) ([]int64, bool) {
	if m, ok := h.memberCache[conv]; ok {
		return m, true
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	m, err := h.members.Members(ctx, conv)
	if err != nil {
		h.opts.Logger.Warn("load members for fan-out failed; sessions will catch up", "conversation", conv, "err", err)
		return nil, false
	}
	if len(h.memberCache) > 100000 {
		clear(h.memberCache)
	}
	h.memberCache[conv] = m
	return m, true
}

func (h *Hub) route(ev chat.Event) {
	if ev.ConversationID == 0 && len(ev.To) > 0 {
		h.toUsers(ev.To, ev)
		return
	}
	eventsItem := func(kind itemKind, payload []byte) item {
		return item{kind: kind, conv: ev.ConversationID, seq: ev.Seq, payload: payload, qos: 1}
	}
	switch ev.Type {
	case chat.EventMemberAdded, chat.EventMemberRemoved, chat.EventConversationUpdated:
		delete(h.memberCache, ev.ConversationID)
	case chat.EventConversationCreated:
		if len(ev.Members) > 0 {
			h.memberCache[ev.ConversationID] = ev.Members
		}
	}
	members, ok := h.membersOf(ev.ConversationID)
	if !ok {
		h.resyncAll()
		return
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		h.opts.Logger.Error("encode event", "type", ev.Type, "err", err)
		return
	}
	switch ev.Type {
	case chat.EventMessageNew:
		if len(members) > h.opts.LargeGroup {
			if payload, err = json.Marshal(ev.Slim()); err != nil {
				return
			}
		}
		it := eventsItem(kMsg, payload)
		if ev.CreatedAt != nil {
			it.at = *ev.CreatedAt
		}
		// Into the recent cache before any session sees it: a session
		// that drops it (while behind) finds it there when it catches up.
		h.recent.put(ev.ConversationID, ev.Seq, payload, len(members) > h.opts.LargeGroup, it.at)
		h.toMembers(members, 0, it)
	case chat.EventTyping:
		it := eventsItem(kEvent, payload)
		it.qos = 0
		h.toMembers(members, ev.UserID, it)
	case chat.EventDeliveryUpdated:
		// To the sender whose messages were delivered (senderId), if still
		// a member; without one, to the other members. Large groups get
		// none: the seen endpoint and history answer instead.
		if len(members) > h.opts.LargeGroup {
			return
		}
		if ev.SenderID == 0 {
			h.toMembers(members, ev.UserID, eventsItem(kEvent, payload))
			return
		}
		for _, m := range members {
			if m == ev.SenderID {
				h.toMembers([]int64{m}, ev.UserID, eventsItem(kEvent, payload))
				return
			}
		}
	case chat.EventConversationCreated:
		for _, u := range members {
			for _, s := range h.sessionsOf(u) {
				s.offer(item{kind: kJoin, conv: ev.ConversationID, seq: ev.Seq})
			}
		}
		h.toMembers(members, 0, eventsItem(kEvent, payload))
	case chat.EventMemberAdded:
		for _, s := range h.sessionsOf(ev.UserID) {
			s.offer(item{kind: kJoin, conv: ev.ConversationID, seq: ev.Seq})
		}
		h.toMembers(members, 0, eventsItem(kEvent, payload))
	case chat.EventMemberRemoved:
		for _, s := range h.sessionsOf(ev.UserID) {
			s.offer(item{kind: kLeave, conv: ev.ConversationID})
			s.offer(eventsItem(kDirect, payload))
		}
		h.toMembers(members, ev.UserID, eventsItem(kEvent, payload))
	default:
		h.toMembers(members, 0, eventsItem(kEvent, payload))
	}
}

func (h *Hub) toMembers(members []int64, except int64, it item) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, u := range members {
		if u == except {
			continue
		}
		for s := range h.byUser[u] {
			s.offer(it)
		}
	}
}

// toUsers queues ev on the events topic of every session of users on this
// node (presence, which has no conversation to route by); like every live
// event it is dropped for sessions not subscribed to their events topic
// yet.
func (h *Hub) toUsers(users []int64, ev chat.Event) {
	payload, err := json.Marshal(ev)
	if err != nil {
		h.opts.Logger.Error("encode event", "type", ev.Type, "err", err)
		return
	}
	it := item{kind: kEvent, payload: payload, qos: 1}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, u := range users {
		for s := range h.byUser[u] {
			s.offer(it)
		}
	}
}

// SendDirect queues a publish for one client only (RPC replies, error
// events); it is sent even before the client subscribed to its events
// topic. It reports false when the client has no session here.
func (h *Hub) SendDirect(clientID string, p Packet) bool {
	s := h.Session(clientID)
	if s == nil {
		return false
	}
	s.offer(item{kind: kDirect, topic: p.Topic, payload: p.Payload, qos: p.QoS, corr: p.CorrelationData})
	return true
}

// SetReady tells clientID's session whether the client is subscribed to its
// events topic; events are held until it is.
func (h *Hub) SetReady(clientID string, ready bool) {
	if s := h.Session(clientID); s != nil {
		k := kReady
		if !ready {
			k = kUnready
		}
		s.offer(item{kind: k})
	}
}

// Ack hands a PUBACK from clientID to its session.
func (h *Hub) Ack(clientID string, packetID uint16) {
	if s := h.Session(clientID); s != nil {
		s.ack(packetID)
	}
}

// watchdog disconnects sessions whose write has been blocked too long: the
// pump cannot notice that itself while it is stuck in the write.
func (h *Hub) watchdog() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case now := <-t.C:
			for _, s := range h.allSessions() {
				if since := s.writingSince.Load(); since != 0 && now.Sub(time.Unix(0, since)) > h.opts.SlowTimeout {
					h.opts.Metrics.SlowDisconnect.Inc()
					h.opts.Logger.Warn("disconnecting slow consumer: write blocked", "client", s.ClientID, "user", s.UserID)
					s.conn.Close("slow consumer: write blocked")
				}
			}
		}
	}
}
