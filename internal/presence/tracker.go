package presence

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/promreg"
	"github.com/chatd/chatd/internal/shrink"
)

// Store is the presence state in the store of record (store.Presence).
type Store interface {
	// Heartbeat reports revived when node's heartbeat was recorded anew
	// since the last heartbeat that answered (it starts, or another node
	// took it for dead: ReapNodes), also when the one that recorded it
	// committed and lost its reply.
	Heartbeat(ctx context.Context, node string) (revived bool, err error)
	// ResetNode clears node's connection flags and returns the users whose
	// connections it cleared.
	ResetNode(ctx context.Context, node string, remove bool) ([]int64, error)
	// SetConnections marks connected[i] held by node where its session
	// is still tokens[i]'s (the connection's, chat.SessionStore.Open),
	// clears disconnected where node holds them, and records seen last
	// seen now.
	SetConnections(ctx context.Context, node string, connected, tokens, disconnected []string, seen []int64) error
	// Reassert marks clients connected to node again where no live node
	// holds them and the session is still tokens[i]'s: a heartbeat's
	// repair, which never takes a session over.
	Reassert(ctx context.Context, node string, clients, tokens []string) error
	// ClaimOnline records users announced online and returns those who
	// were not (whom to announce): none whose watchers were never told
	// they left. The caller's connections of theirs are recorded first.
	ClaimOnline(ctx context.Context, users []int64) ([]int64, error)
	// ClaimOffline records the users among users connected to no live
	// node but node announced offline and returns those whose watchers
	// were last told they are online (whom to announce: once per
	// transition) with when they were last seen, as Presence answers it
	// (zero: never).
	ClaimOffline(ctx context.Context, node string, users []int64) (map[int64]time.Time, error)
	// ReapNodes clears the connections of the other nodes whose heartbeat
	// ran out (they crashed) and returns their users, each with when it
	// was last seen (the node's last heartbeat, or the connection's start
	// when that came after it).
	ReapNodes(ctx context.Context, node string) (map[int64]time.Time, error)
	Watchers(ctx context.Context, users []int64, maxMembers int) (map[int64][]int64, error)
	// Watching: of the pairs (subjects[i], watchers[i]), those where
	// Watchers would list the watcher for the subject now, by subject;
	// via[i] is a conversation the pair is likely to share still, or 0
	// when none is (a removal's pairs).
	Watching(ctx context.Context, subjects, watchers, via []int64, maxMembers int) (map[int64][]int64, error)
	// HiddenFrom: for each user, who would watch them but for their own
	// choice (they hide their presence, or blocked them).
	HiddenFrom(ctx context.Context, users []int64, maxMembers int) (map[int64][]int64, error)
	Presence(ctx context.Context, userID int64) (chat.Presence, error)
	// Announced is Presence of each of users, in their order, as their
	// watchers were told it: online also during a grace (store.Presence).
	Announced(ctx context.Context, users []int64) ([]chat.Presence, error)
	SharesConversation(ctx context.Context, a, b int64) (bool, error)
}

// Config configures a Tracker; NodeID, Store and Hub are required.
type Config struct {
	NodeID string
	Store  Store
	// Hub delivers presence events (chat.Event.To names the watchers) to
	// the sessions on this node (delivery.Hub).
	Hub        chat.Publisher
	LargeGroup int           // conversations above this many members get no pushes (200)
	Grace      time.Duration // a user offline this long is announced offline (1s)
	Heartbeat  time.Duration // node heartbeat interval; a node silent 3× this is dead (5s)
	// NoPush turns presence events off: the state is kept (queries work)
	// but nobody is told.
	NoPush bool
	// Publish sends this node's presence events to the other nodes (nil:
	// pushes stay on this node). It must not block for long.
	Publish    func(chat.Event)
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics not registered
}

// TTL is how long a node's heartbeat counts, for a heartbeat interval.
func TTL(heartbeat time.Duration) time.Duration { return 3 * heartbeat }

// Tracker is the presence subsystem of one node.
type Tracker struct {
	cfg Config
	log *slog.Logger

	mu           sync.Mutex
	clients      map[string]*conn    // client id -> open connections on this node
	users        map[int64]int       // user -> open connections on this node
	zeroAt       map[int64]time.Time // users whose last connection closed, not yet announced offline
	dirtyClients map[string]int64    // client id -> its user, flag to write
	dirtyUsers   map[int64]struct{}  // users who came online
	peaks        [5]int              // the most entries each map above held since it was last copied (shrink.Map)
	remote       []chat.Event
	// remoteAt is where each user's event waits in remote, by whether it
	// is a hidden one (those go to other watchers: HiddenFrom).
	remoteAt   map[remoteKey]int
	visibility map[int64]visibilityChange // users whose presence was hidden or shown again, to announce
	// ended holds the hidden events membership changes owe this node's
	// sessions (SharingEnded), at most remoteQueue.
	ended []chat.Event
	// started holds, for each user whose current state membership
	// changes owe this node's sessions (SharingStarted), those sessions'
	// users, each with the conversation whose join owes it; at most
	// remoteQueue users.
	started map[int64][]owedTo

	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	failing atomic.Bool
	// closeCtx is Close's context, set before stop is closed; closing is
	// set by the run goroutine (and read only by it) once it stops.
	closeCtx context.Context
	closing  bool
	// reviving holds, while the announcement that they are online again
	// is owed (another node took this one for dead and announced its
	// users offline), the users connected here when the heartbeat
	// reported the revival: it reports it once, and a failed announcement
	// is retried at the next. A user's own online claim since (a first
	// connection here, or a return after its offline) announced them and
	// takes them out: announced again, they were told twice. Run by the
	// run goroutine alone.
	reviving map[int64]struct{}
	// ownClaims holds the users this node's own claims announced online
	// while its heartbeats failed (beatFailing), kept until a heartbeat
	// goes through with no revival owed. A node that took this one for
	// dead meanwhile announced offline those claimed before it did, not
	// those claimed after (a user connecting while this node's database
	// was out of its reach, claimed once it was back, before the
	// heartbeat that finds the node revived): for them the revival's
	// claim decides, the reaper's offline having cleared what it answers
	// by. (The others are announced whatever it answers: a reaper of
	// before migration 0045 announced offline without claiming.) Run by
	// the run goroutine alone, as beatFailing.
	ownClaims   map[int64]struct{}
	beatFailing bool
	// unsure holds the users whose grace was running when the heartbeat
	// found this node revived: the node that took it for dead may have
	// announced them offline (it cleared their flags before this node
	// wrote their departure), so a return within the grace is claimed
	// online as a first connection is, announced only if it did. Until
	// that claim goes through or the grace ends. Under mu.
	unsure map[int64]struct{}

	onlineUsers   prometheus.Gauge
	pushed        *prometheus.CounterVec
	remoteDropped prometheus.Counter
}

// remoteQueue bounds the users whose presence events from other nodes
// wait to be pushed here: a user's event replaces the one of theirs that
// waits (only the latest state is worth showing), and a user's past the
// bound is dropped (and counted): presence is best effort, and queries
// read PostgreSQL.
const remoteQueue = 10000

type remoteKey struct {
	user   int64
	hidden bool
}

type conn struct {
	user  int64
	n     int
	token string // the latest connection's session token
}

var (
	_ chat.PresenceSource   = (*Tracker)(nil)
	_ chat.PresenceNotifier = (*Tracker)(nil)
)

// New validates cfg and registers the metrics; Start runs the tracker.
func New(cfg Config) (*Tracker, error) {
	if cfg.NodeID == "" || cfg.Store == nil || cfg.Hub == nil {
		return nil, fmt.Errorf("presence: NodeID, Store and Hub are required")
	}
	if cfg.LargeGroup <= 0 {
		cfg.LargeGroup = 200
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := &Tracker{
		cfg: cfg, log: cfg.Logger,
		clients: map[string]*conn{}, users: map[int64]int{}, zeroAt: map[int64]time.Time{},
		dirtyClients: map[string]int64{}, dirtyUsers: map[int64]struct{}{}, visibility: map[int64]visibilityChange{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		onlineUsers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chat_presence_online_users",
			Help: "Users with at least one MQTT connection on this node."}),
		pushed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_presence_events_total",
			Help: "Presence events pushed to watchers on this node, by origin (local, remote)."}, []string{"origin"}),
		remoteDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_presence_remote_dropped_total",
			Help: "Presence events from other nodes dropped before they were pushed here: events of more users were waiting than the tracker holds."}),
	}
	if err := promreg.Register(cfg.Registerer, t.onlineUsers, t.pushed, t.remoteDropped); err != nil {
		return nil, fmt.Errorf("register presence metrics: %w", err)
	}
	return t, nil
}

// Start clears the flags a previous process with this node id may have
// left, beats the first heartbeat and starts the tracker's goroutine. The
// users whose connections that process held went offline now, as far as
// anyone was told (it crashed: a clean stop clears its flags): their
// grace starts, and those who do not come back are announced offline.
func (t *Tracker) Start(ctx context.Context) error {
	left, err := t.cfg.Store.ResetNode(ctx, t.cfg.NodeID, false)
	if err != nil {
		return fmt.Errorf("presence: reset node: %w", err)
	}
	if len(left) > 0 {
		now := time.Now()
		t.mu.Lock()
		for _, u := range left {
			if _, leaving := t.zeroAt[u]; t.users[u] == 0 && !leaving {
				t.zeroAt[u] = now
			}
		}
		t.mu.Unlock()
		t.signal()
	}
	if _, err := t.cfg.Store.Heartbeat(ctx, t.cfg.NodeID); err != nil {
		return fmt.Errorf("presence: heartbeat: %w", err)
	}
	go t.run()
	return nil
}

func (t *Tracker) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Connected records an established MQTT session of userID, opened with
// token (chat.SessionStore.Open): its flag is written only while the
// session is that connection's, so a write that comes late (retried after
// a failure) never takes the session from a newer connection elsewhere.
func (t *Tracker) Connected(clientID, token string, userID int64) {
	t.mu.Lock()
	c := t.clients[clientID]
	if c == nil {
		c = &conn{user: userID}
		t.clients[clientID] = c
	}
	c.n++
	c.token = token
	t.users[userID]++
	if t.users[userID] == 1 {
		t.onlineUsers.Inc()
		_, pending := t.zeroAt[userID]
		// Back within the grace: nobody was told it left, unless the
		// node that took this one for dead did (unsure).
		_, unsure := t.unsure[userID]
		delete(t.zeroAt, userID)
		if !pending || unsure {
			t.dirtyUsers[userID] = struct{}{}
		}
	}
	t.dirtyClients[clientID] = userID
	t.mu.Unlock()
	t.signal()
}

// Disconnected records that an MQTT session of userID ended, however.
func (t *Tracker) Disconnected(clientID string, userID int64) {
	t.mu.Lock()
	c := t.clients[clientID]
	if c == nil {
		t.mu.Unlock()
		return
	}
	if c.n--; c.n <= 0 {
		delete(t.clients, clientID)
	}
	if n := t.users[c.user] - 1; n > 0 {
		t.users[c.user] = n
	} else {
		delete(t.users, c.user)
		delete(t.dirtyUsers, c.user)
		t.onlineUsers.Dec()
		t.zeroAt[c.user] = time.Now()
	}
	t.dirtyClients[clientID] = c.user
	t.shrinkLocked()
	t.mu.Unlock()
	t.signal()
}

// shrinkLocked gives back the room the maps grew to in a burst of
// connections once they hold far fewer; the caller holds t.mu.
func (t *Tracker) shrinkLocked() {
	t.clients = shrink.Map(t.clients, &t.peaks[0])
	t.users = shrink.Map(t.users, &t.peaks[1])
	t.zeroAt = shrink.Map(t.zeroAt, &t.peaks[2])
	t.dirtyClients = shrink.Map(t.dirtyClients, &t.peaks[3])
	t.dirtyUsers = shrink.Map(t.dirtyUsers, &t.peaks[4])
}

// Online reports whether userID has a connection on this node.
func (t *Tracker) Online(userID int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.users[userID] > 0
}

// Remote hands over a presence event another node published; it is pushed
// to this node's watchers. It never blocks.
func (t *Tracker) Remote(ev chat.Event) {
	if ev.Type != chat.EventPresence || ev.UserID <= 0 || ev.Online == nil {
		return
	}
	k := remoteKey{ev.UserID, ev.Hidden}
	t.mu.Lock()
	if i, ok := t.remoteAt[k]; ok {
		t.remote[i] = ev
	} else if len(t.remote) < remoteQueue {
		if t.remoteAt == nil {
			t.remoteAt = map[remoteKey]int{}
		}
		t.remoteAt[k] = len(t.remote)
		t.remote = append(t.remote, ev)
	} else {
		t.remoteDropped.Inc()
	}
	t.mu.Unlock()
	t.signal()
}

// PresenceVisibilityChanged announces that userID's presence was hidden
// from some of the users who share a conversation with them (hidden: a
// presence event saying only hidden goes to those who may no longer see
// it, on every node), or shown to some again (their current state goes to
// who may see it). It never blocks.
func (t *Tracker) PresenceVisibilityChanged(userID int64, hidden bool) {
	if userID <= 0 {
		return
	}
	t.mu.Lock()
	c := t.visibility[userID]
	if hidden {
		c.hidden = true
	} else {
		c.shown = true
	}
	t.visibility[userID] = c
	t.mu.Unlock()
	t.signal()
}

// SharingEnded hands over a member.removed, committed here or on another
// node (each node gets every one): the users whose last conversation of
// at most LargeGroup members with its user it ended, and who could see
// each other's presence (chat.Event.PresenceHiddenFrom, PresenceHidden),
// are told on this node that they may no longer, as a hide tells them
// (else each would go on showing the other online: the other's later
// changes are not announced to them). Only those connected here: the
// events go to no other node. It never blocks; past remoteQueue events
// waiting, they are dropped (and counted as remote ones are).
func (t *Tracker) SharingEnded(ev chat.Event) {
	if t.cfg.NoPush || len(ev.PresenceHiddenFrom)+len(ev.PresenceHidden) == 0 {
		return
	}
	t.mu.Lock()
	evs := chat.PresenceEndedEvents(ev, func(u int64) bool { return t.users[u] > 0 })
	if len(t.ended)+len(evs) > remoteQueue {
		t.remoteDropped.Add(float64(len(evs)))
		evs = nil
	}
	t.ended = append(t.ended, evs...)
	t.mu.Unlock()
	if len(evs) > 0 {
		t.signal()
	}
}

// SharingStarted hands over a member.added or conversation.created,
// committed here or on another node (each node gets every one): the users
// who started sharing a conversation of at most LargeGroup members
// through it, and may see each other's presence
// (chat.Event.PresenceShown), get on this node each other's current
// state, as a show gives it (else each would show the other as nothing
// until the other's next change). Only those connected here. It never
// blocks; past remoteQueue users waiting, the event's are dropped (and
// counted as remote ones are).
func (t *Tracker) SharingStarted(ev chat.Event) {
	if t.cfg.NoPush || len(ev.PresenceShown) == 0 {
		return
	}
	t.mu.Lock()
	owed := chat.PresenceStartedWatchers(ev, func(u int64) bool { return t.users[u] > 0 })
	if len(t.started)+len(owed) > remoteQueue {
		t.remoteDropped.Add(float64(len(owed)))
		owed = nil
	}
	for u, to := range owed {
		if t.started == nil {
			t.started = map[int64][]owedTo{}
		}
		for _, w := range to {
			t.started[u] = append(t.started[u], owedTo{w, ev.ConversationID})
		}
	}
	t.mu.Unlock()
	if len(owed) > 0 {
		t.signal()
	}
}

// owedTo is a user owed a subject's state (Tracker.started), with the
// conversation whose join owes it.
type owedTo struct{ watcher, via int64 }

// visibilityChange is what a user's visibility changes waiting for the
// next round asked: a hide, a show, or both. Both are announced, each to
// its audience as it is then: a hide and a show concern different users
// (a block of one, an unblock of another), and the last of them alone
// would leave the others told nothing (those hidden from would go on
// showing the user online, and nobody tells them otherwise).
type visibilityChange struct{ hidden, shown bool }

// Presence answers a presence query from the shared state.
func (t *Tracker) Presence(ctx context.Context, userID int64) (chat.Presence, error) {
	return t.cfg.Store.Presence(ctx, userID)
}

// SharesConversation reports whether a and b share a conversation.
func (t *Tracker) SharesConversation(ctx context.Context, a, b int64) (bool, error) {
	return t.cfg.Store.SharesConversation(ctx, a, b)
}

// Close announces the users whose last connection here closed (the
// broker disconnected every client before) offline to the other nodes
// once their grace ran out and they did not connect elsewhere, within
// ctx; then it clears this node's connection flags and heartbeat, so its
// users stop counting as online at once, and stops the goroutine.
func (t *Tracker) Close(ctx context.Context) error {
	t.once.Do(func() {
		t.closeCtx = ctx
		close(t.stop)
	})
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close presence: %w", ctx.Err())
	}
}

func (t *Tracker) run() {
	defer close(t.done)
	beat := time.NewTicker(t.cfg.Heartbeat)
	defer beat.Stop()
	grace := time.NewTimer(time.Hour)
	defer grace.Stop()
	for {
		select {
		case <-t.stop:
			t.announceDeparted(t.closeCtx)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := t.cfg.Store.ResetNode(ctx, t.cfg.NodeID, true); err != nil {
				t.log.Warn("presence: clearing this node's connections failed; they expire with its heartbeat", "err", err)
			}
			cancel()
			return
		case <-t.wake:
		case <-grace.C:
		case <-beat.C:
			t.heartbeat()
		}
		if next := t.process(); next > 0 {
			grace.Reset(next)
		}
	}
}

// closeReserve is what announceDeparted leaves of Close's context for
// clearing the node's flags after it.
const closeReserve = time.Second

// announceDeparted runs the presence grace of the users this node's
// shutdown disconnected, as for any disconnect, so the other nodes'
// watchers learn who did not come back elsewhere, instead of showing them
// online until they ask. Only with other nodes to tell (Publish): this
// node's own watchers are gone. Users whose grace ends after ctx's
// deadline (less closeReserve) stay unannounced, and the shutdown does not
// wait for them.
func (t *Tracker) announceDeparted(ctx context.Context) {
	if t.cfg.Publish == nil || t.cfg.NoPush {
		return
	}
	t.closing = true
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-closeReserve))
		defer cancel()
	}
	for {
		next := t.process()
		if d, ok := ctx.Deadline(); next <= 0 || ok && time.Now().Add(next).After(d) {
			return
		}
		wait := time.NewTimer(next)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return
		}
	}
}

func (t *Tracker) ok(what string, err error) bool {
	if err == nil {
		if t.failing.Swap(false) {
			t.log.Info("presence: database reachable again")
		}
		return true
	}
	if !t.failing.Swap(true) {
		t.log.Warn("presence: "+what+" failed; retrying", "err", err)
	}
	return false
}

// heartbeat proves this node alive and re-asserts the flags of every
// session connected here that no live node holds (one that another node
// cleared by mistake, or a write that failed, is repaired within one
// interval; one a newer connection on another node took over stays
// with it, also while its node has not written its flag yet). When another node had taken this one for dead (its heartbeat
// lapsed), that node announced its users offline: they are announced
// online again. Then it takes over what crashed nodes left (reapDead).
func (t *Tracker) heartbeat() {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Heartbeat)
	defer cancel()
	revived, err := t.cfg.Store.Heartbeat(ctx, t.cfg.NodeID)
	if t.beatFailing = !t.ok("heartbeat", err); t.beatFailing {
		return
	}
	t.mu.Lock()
	live := make([]string, 0, len(t.clients))
	tokens := make([]string, 0, len(t.clients))
	for id, c := range t.clients {
		live, tokens = append(live, id), append(tokens, c.token)
	}
	if revived {
		if t.reviving == nil {
			t.reviving = make(map[int64]struct{}, len(t.users))
		}
		for u := range t.users {
			t.reviving[u] = struct{}{}
		}
		for u := range t.zeroAt {
			if t.cfg.NoPush {
				break // nobody is told either way
			}
			if t.unsure == nil {
				t.unsure = make(map[int64]struct{}, len(t.zeroAt))
			}
			t.unsure[u] = struct{}{}
		}
	}
	var back []int64
	for u := range t.reviving {
		if t.users[u] > 0 { // one gone since is announced offline after its grace
			back = append(back, u)
		}
	}
	t.mu.Unlock()
	switch {
	case len(live) > 0 && !t.ok("record connections", t.cfg.Store.Reassert(ctx, t.cfg.NodeID, live, tokens)):
		// Announced once the next beat has repaired the flags.
	case len(back) == 0 || t.cfg.NoPush:
		t.reviving = nil
	default:
		// All of them, as before the claims (the node that took this one
		// for dead may have announced them offline without claiming it:
		// a chatd of before migration 0045), but those owedRevival
		// leaves out.
		if claimed, err := t.cfg.Store.ClaimOnline(ctx, back); t.ok("claim presence", err) {
			t.reviving = nil
			t.announce(ctx, onlineEvents(t.owedRevival(back, claimed), time.Now()))
		}
	}
	if t.reviving == nil {
		// Claims before this heartbeat came before any reap of this
		// node to come.
		t.ownClaims = nil
	}
	t.reapDead(ctx)
}

// owedRevival is who among back a revival announces online: all of them
// but those this node's own claims announced while its heartbeats failed
// (ownClaims: the reaper may have come before), unless the revival's
// claim says the reaper announced them offline after (claimed).
func (t *Tracker) owedRevival(back, claimed []int64) []int64 {
	if len(t.ownClaims) == 0 {
		return back
	}
	reaped := make(map[int64]struct{}, len(claimed))
	for _, u := range claimed {
		reaped[u] = struct{}{}
	}
	owed := make([]int64, 0, len(back))
	for _, u := range back {
		_, own := t.ownClaims[u]
		if _, after := reaped[u]; !own || after {
			owed = append(owed, u)
		}
	}
	return owed
}

// announce publishes this node's presence events to the other nodes and
// pushes them to its own watchers.
func (t *Tracker) announce(ctx context.Context, events []chat.Event) {
	if t.cfg.Publish != nil {
		for _, ev := range events {
			t.cfg.Publish(ev)
		}
	}
	t.push(ctx, events, "local")
}

// reapDead takes over the connections of the nodes that stopped beating
// (they crashed, and will never announce their users offline) and
// announces offline those of their users connected nowhere now, last seen
// when the dead node last vouched for them: else whoever was told
// they were online would show them online until they asked.
func (t *Tracker) reapDead(ctx context.Context) {
	gone, err := t.cfg.Store.ReapNodes(ctx, t.cfg.NodeID)
	if !t.ok("take over dead nodes' connections", err) || len(gone) == 0 || t.cfg.NoPush {
		return
	}
	users := make([]int64, 0, len(gone))
	t.mu.Lock()
	for u := range gone {
		_, leaving := t.zeroAt[u] // announced after its grace here
		if t.users[u] == 0 && !leaving {
			users = append(users, u)
		}
	}
	t.mu.Unlock()
	if len(users) == 0 {
		return
	}
	claimed, err := t.cfg.Store.ClaimOffline(ctx, t.cfg.NodeID, users)
	if !t.ok("claim presence", err) {
		// Nobody else will claim them: their node is gone.
		t.departAgain(users, gone)
		t.signal()
		return
	}
	t.announce(ctx, offlineEvents(users, claimed, gone))
}

// departAgain puts back the users whose offline claim failed among those
// whose grace ran out (at: when each left), for the claim to be retried:
// else nobody would tell their watchers, and their flag still says they
// were announced online. A user connected here again, or leaving again,
// is left as it is.
func (t *Tracker) departAgain(users []int64, at map[int64]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range users {
		if _, leaving := t.zeroAt[u]; t.users[u] == 0 && !leaving {
			t.zeroAt[u] = at[u]
		}
	}
}

// onlineEvents announce users online, last seen now.
func onlineEvents(users []int64, now time.Time) []chat.Event {
	events := make([]chat.Event, 0, len(users))
	for _, u := range users {
		at := now.UTC()
		events = append(events, chat.PresenceEvent(chat.Presence{UserID: u, Online: true, LastSeen: &at}))
	}
	return events
}

// offlineEvents announce the users among users that ClaimOffline claimed,
// each last seen when it says (as a presence query answers); at, the
// departure as this node saw it, stands in for a user the database has no
// record of yet (its write is being retried).
func offlineEvents(users []int64, claimed, at map[int64]time.Time) []chat.Event {
	var events []chat.Event
	for _, u := range users {
		last, ok := claimed[u]
		if !ok {
			continue
		}
		if last.IsZero() {
			last = at[u].UTC()
		}
		events = append(events, chat.PresenceEvent(chat.Presence{UserID: u, Online: false, LastSeen: &last}))
	}
	return events
}

// process writes the connection flags and announces due transitions. It
// returns when the next pending offline falls due (0: none pending).
func (t *Tracker) process() time.Duration {
	now := time.Now()
	t.mu.Lock()
	var connected, tokens, disconnected []string
	var seen []int64
	t.shrinkLocked() // the peaks of what the connects since the last call added
	dirty := make(map[string]int64, len(t.dirtyClients))
	for id, u := range t.dirtyClients {
		dirty[id] = u
		if c := t.clients[id]; c != nil {
			connected = append(connected, id)
			tokens = append(tokens, c.token)
		} else {
			disconnected = append(disconnected, id)
			if t.users[u] == 0 {
				seen = append(seen, u) // their last connection here closed
			}
		}
	}
	clear(t.dirtyClients)
	cameOnline := make([]int64, 0, len(t.dirtyUsers))
	for u := range t.dirtyUsers {
		cameOnline = append(cameOnline, u)
	}
	clear(t.dirtyUsers)
	var wentOffline []int64
	offlineAt := map[int64]time.Time{}
	next := time.Duration(0)
	for u, at := range t.zeroAt {
		if due := at.Add(t.cfg.Grace); !due.After(now) {
			wentOffline = append(wentOffline, u)
			offlineAt[u] = at
			delete(t.zeroAt, u)
			delete(t.unsure, u) // its departure is claimed now
		} else if d := due.Sub(now); next == 0 || d < next {
			next = d
		}
	}
	if len(t.unsure) == 0 {
		t.unsure = nil
	}
	remote := t.remote
	t.remote, t.remoteAt = nil, nil
	visibility := t.visibility
	t.visibility = map[int64]visibilityChange{}
	ended, started := t.ended, t.started
	t.ended, t.started = nil, nil
	t.shrinkLocked()
	t.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	retry := func() {
		if next == 0 || next > time.Second {
			next = time.Second
		}
	}
	written := true
	if len(connected)+len(disconnected) > 0 {
		if written = t.ok("record connections", t.cfg.Store.SetConnections(ctx, t.cfg.NodeID, connected, tokens, disconnected, seen)); !written {
			t.mu.Lock()
			for id, u := range dirty {
				if _, again := t.dirtyClients[id]; !again {
					t.dirtyClients[id] = u
				}
			}
			t.mu.Unlock()
			retry()
		}
	}

	var events []chat.Event
	if t.cfg.NoPush {
		cameOnline, wentOffline, remote, visibility = nil, nil, nil, nil
	}
	if len(cameOnline) > 0 {
		// Claimed only once their connections here are recorded: a node
		// whose grace of theirs ends after the claim must see them.
		var claimed []int64
		var err error
		if written {
			claimed, err = t.cfg.Store.ClaimOnline(ctx, cameOnline)
		}
		if written && t.ok("claim presence", err) {
			events = append(events, onlineEvents(claimed, now)...)
			for _, u := range claimed {
				delete(t.reviving, u)
				if !t.beatFailing {
					continue
				}
				if t.ownClaims == nil {
					t.ownClaims = make(map[int64]struct{}, len(claimed))
				}
				t.ownClaims[u] = struct{}{}
			}
			t.mu.Lock()
			for _, u := range cameOnline {
				delete(t.unsure, u)
			}
			t.mu.Unlock()
		} else {
			t.mu.Lock()
			for _, u := range cameOnline {
				if t.users[u] > 0 {
					t.dirtyUsers[u] = struct{}{}
				}
			}
			t.mu.Unlock()
			retry()
		}
	}
	if len(wentOffline) > 0 {
		claimed, err := t.cfg.Store.ClaimOffline(ctx, t.cfg.NodeID, wentOffline)
		if t.ok("claim presence", err) {
			events = append(events, offlineEvents(wentOffline, claimed, offlineAt)...)
		} else {
			t.departAgain(wentOffline, offlineAt)
			retry()
		}
	}
	events = append(events, t.visibilityEvents(ctx, visibility)...)
	if len(events) > 0 && t.cfg.Publish != nil {
		for _, ev := range events {
			t.cfg.Publish(ev)
		}
	}
	if !t.closing { // else the node's clients are gone
		t.push(ctx, events, "local")
		t.push(ctx, remote, "remote")
		t.pushEnded(ctx, ended)
		t.pushStarted(ctx, started)
	}
	return next
}

// pushEnded tells the users of this node that a removal ended their
// sharing of a conversation with others (ended: hidden events addressed
// as the removal's statement read who they are) that they may no longer
// see those others' presence, except where they watch them again now: a
// join committed after the removal made them share another (its
// member.added lists them, and they are given the state for it), and
// that join's event may have come first (through another Kafka
// partition, or in an earlier round): a hidden pushed after it would
// leave them showing hidden while they share a conversation. Only those
// pairs are read (Watching, no conversation given: they shared none when
// the removal committed, so it reads them from the side of the removed
// user, in all of its event's pairs); one that cannot be read now is
// told hidden, as before.
func (t *Tracker) pushEnded(ctx context.Context, ended []chat.Event) {
	if len(ended) == 0 {
		return
	}
	var subjects, watching, via []int64
	for _, ev := range ended {
		for _, w := range ev.To {
			subjects, watching, via = append(subjects, ev.UserID), append(watching, w), append(via, 0)
		}
	}
	watchers, err := t.cfg.Store.Watching(ctx, subjects, watching, via, t.cfg.LargeGroup)
	if !t.ok("read presence watchers", err) {
		watchers = nil
	}
	for _, ev := range ended {
		to := slices.DeleteFunc(slices.Clone(ev.To), func(w int64) bool { return slices.Contains(watchers[ev.UserID], w) })
		if len(to) == 0 {
			continue
		}
		ev.To = to
		t.cfg.Hub.Publish(ev)
		t.pushed.WithLabelValues("local").Inc()
	}
}

// pushStarted gives the users of this node that started sharing a
// conversation with others their current state (started: each of them,
// with whom to tell), as their watchers were told it (Announced: online
// during the grace after a disconnect too, which the query answers
// offline: told offline then, a watcher would keep it when they come
// back within the grace, which announces nothing); those whose state
// cannot be read now are left out: presence is best effort. Only
// to those who watch them still: the join's transaction read who may,
// and a block, a hide or a removal committed since (before the event
// got here: through Kafka, or in this round) has told them hidden
// already. Only those pairs are checked (Watching), not every watcher of
// each user: a newcomer to a group of a team that shares many groups
// would otherwise read the whole team's audiences in this round.
func (t *Tracker) pushStarted(ctx context.Context, started map[int64][]owedTo) {
	if len(started) == 0 {
		return
	}
	users := make([]int64, 0, len(started))
	var subjects, watching, via []int64
	for u, to := range started {
		users = append(users, u)
		for _, o := range to {
			subjects, watching, via = append(subjects, u), append(watching, o.watcher), append(via, o.via)
		}
	}
	watchers, err := t.cfg.Store.Watching(ctx, subjects, watching, via, t.cfg.LargeGroup)
	if !t.ok("read presence watchers", err) {
		return
	}
	states, err := t.cfg.Store.Announced(ctx, users)
	if !t.ok("read presence", err) {
		return
	}
	for _, p := range states {
		may := make(map[int64]bool, len(watchers[p.UserID]))
		for _, w := range watchers[p.UserID] {
			may[w] = true
		}
		var to []int64
		for _, o := range started[p.UserID] {
			if may[o.watcher] {
				to = append(to, o.watcher)
			}
		}
		if len(to) == 0 {
			continue
		}
		ev := chat.PresenceEvent(p)
		ev.To = to
		t.cfg.Hub.Publish(ev)
		t.pushed.WithLabelValues("local").Inc()
	}
}

// visibilityEvents are the events announcing visibility changes: hidden,
// the user's current state, or both (a user whose state cannot be read
// now is left out: presence is best effort).
func (t *Tracker) visibilityEvents(ctx context.Context, visibility map[int64]visibilityChange) []chat.Event {
	var events []chat.Event
	for u, c := range visibility {
		if c.hidden {
			events = append(events, chat.PresenceEvent(chat.Presence{UserID: u, Hidden: true}))
		}
		if !c.shown {
			continue
		}
		p, err := t.cfg.Store.Presence(ctx, u)
		if t.ok("read presence", err) {
			events = append(events, chat.PresenceEvent(p))
		}
	}
	return events
}

// push sends each event to the watchers of its user on this node; a
// hidden one to the users its user hides their presence from.
func (t *Tracker) push(ctx context.Context, events []chat.Event, origin string) {
	if len(events) == 0 {
		return
	}
	var subjects, hiders []int64
	for _, ev := range events {
		if ev.Hidden {
			hiders = append(hiders, ev.UserID)
		} else {
			subjects = append(subjects, ev.UserID)
		}
	}
	var watchers, hiddenFrom map[int64][]int64
	var err error
	if len(subjects) > 0 {
		watchers, err = t.cfg.Store.Watchers(ctx, subjects, t.cfg.LargeGroup)
		if !t.ok("read presence watchers", err) {
			return
		}
	}
	if len(hiders) > 0 {
		hiddenFrom, err = t.cfg.Store.HiddenFrom(ctx, hiders, t.cfg.LargeGroup)
		if !t.ok("read presence watchers", err) {
			return
		}
	}
	for _, ev := range events {
		w := watchers[ev.UserID]
		if ev.Hidden {
			w = hiddenFrom[ev.UserID]
		}
		if len(w) > 0 {
			ev.To = w
			t.cfg.Hub.Publish(ev)
			t.pushed.WithLabelValues(origin).Inc()
		}
	}
}
