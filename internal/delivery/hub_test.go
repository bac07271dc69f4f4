package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeConn records what the pump writes and acknowledges it (or not),
// standing in for a client socket; the store behind the hub is real.
type fakeConn struct {
	hub    *delivery.Hub
	self   chat.Conn // what the session was attached with (c, or a wrapper of c)
	id     string
	ack    bool
	mu     sync.Mutex
	got    []chat.Packet
	writes []int // packets per WritePublishes call
	closed chan string
}

func newConn(id string, ack bool) *fakeConn {
	c := &fakeConn{id: id, ack: ack, closed: make(chan string, 1)}
	c.self = c
	return c
}

func (c *fakeConn) Write(_ []chat.Ack, ps []chat.Packet) error {
	select {
	case <-c.closed:
		return fmt.Errorf("closed")
	default:
	}
	c.mu.Lock()
	c.got = append(c.got, ps...)
	c.writes = append(c.writes, len(ps))
	c.mu.Unlock()
	for _, p := range ps {
		if c.ack && p.QoS > 0 {
			go c.hub.Acked(c.id, c.self, p.PacketID)
		}
	}
	return nil
}

func (c *fakeConn) Close(reason string) {
	select {
	case c.closed <- reason:
	default:
	}
}

// seqs returns the seqs of message.new events received for conv.
func (c *fakeConn) seqs(conv int64) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int64
	for _, p := range c.got {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.Type == chat.EventMessageNew && ev.ConversationID == conv {
			out = append(out, ev.Seq)
		}
	}
	return out
}

// packets returns what was written so far.
func (c *fakeConn) packets() []chat.Packet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chat.Packet(nil), c.got...)
}

func (c *fakeConn) unacked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

type fixture struct {
	pool     *pgxpool.Pool
	st       *store.Store
	sessions *store.Sessions
	svc      *chat.Service
	conv     chat.Conversation
}

func setup(t testing.TB) fixture {
	t.Helper()
	st, pool := pgtest.NewStore(t, chat.DefaultLimits())
	svc := chat.NewService(st, chat.DefaultLimits())
	conv, err := svc.CreateGroup(context.Background(), 1, "pump", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{pool: pool, st: st, sessions: store.NewSessions(pool), svc: svc, conv: conv}
}

func (f fixture) send(t *testing.T, n int) []chat.Event {
	t.Helper()
	evs := make([]chat.Event, 0, n)
	for i := 0; i < n; i++ {
		res, err := f.svc.Send(context.Background(), chat.SendRequest{ConversationID: f.conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: fmt.Sprint("m", i)})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, chat.MessageEvent(res.Message))
	}
	return evs
}

// publishEach hands evs to h one by one, as commits reach it.
func publishEach(h *delivery.Hub, evs []chat.Event) {
	for _, ev := range evs {
		h.Publish(ev)
	}
}

func newHub(t *testing.T, f fixture, o delivery.Options) *delivery.Hub {
	t.Helper()
	return startHub(t, f.sessions, o)
}

// startHub is a hub on st, closed when the test ends.
func startHub(tb testing.TB, st chat.DeliveryStore, o delivery.Options) *delivery.Hub {
	tb.Helper()
	h := delivery.NewHub(st, o)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	return h
}

func attach(t *testing.T, h *delivery.Hub, f fixture, id string, persistent, ack bool) *fakeConn {
	t.Helper()
	return attachUser(t, h, f, id, 2, persistent, ack, true)
}

// attachUser is attach for session id of user; ready is whether it is
// subscribed to its events topic yet.
func attachUser(t *testing.T, h *delivery.Hub, f fixture, id string, user int64, persistent, ack, ready bool) *fakeConn {
	t.Helper()
	c := newConn(id, ack)
	c.hub = h
	attachConn(t, h, f, c, id, user, persistent, ready)
	return c
}

// attachConn opens session id of user over c and waits until it loaded
// its positions.
func attachConn(t *testing.T, h *delivery.Hub, f fixture, c chat.Conn, id string, user int64, persistent, ready bool) {
	t.Helper()
	if _, err := f.sessions.Open(context.Background(), id, "", user, persistent, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	h.Attach(c, id, user, persistent, ready, 0)
	testkit.Receive(t, h.Session(id).Loaded(), 10*time.Second, "session never loaded its positions")
}

func waitSeqs(t *testing.T, c *fakeConn, conv int64, n int) []int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(c.seqs(conv)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d/%d messages", len(c.seqs(conv)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.seqs(conv)
}

func wantExactly(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from+1 {
		t.Fatalf("got %d messages %v..., want seqs %d..%d exactly once", len(got), head(got), from, to)
	}
	for i, s := range got {
		if s != from+int64(i) {
			t.Fatalf("position %d has seq %d, want %d", i, s, from+int64(i))
		}
	}
}

func head(s []int64) []int64 {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func TestReorderedDuplicatedAndLostNotificationsStillDeliverInOrderExactlyOnce(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 16})
	c := attach(t, h, f, "reorder", false, true)
	evs := f.send(t, 300)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < len(evs); {
		// Shuffle within small windows (cross-goroutine notify order),
		// drop 10% (a lost cross-node event), repeat 10%.
		j := min(i+1+rng.Intn(6), len(evs))
		win := append([]chat.Event(nil), evs[i:j]...)
		rng.Shuffle(len(win), func(a, b int) { win[a], win[b] = win[b], win[a] })
		for _, ev := range win {
			if rng.Intn(10) == 0 {
				continue
			}
			h.Publish(ev)
			if rng.Intn(10) == 0 {
				h.Publish(ev)
			}
		}
		i = j
	}
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 300), 1, 300)
	// A late duplicate changes nothing.
	h.Publish(evs[0])
	h.Publish(evs[299])
	publishEach(h, f.send(t, 1))
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 301), 1, 301)
}

func TestQueueOverflowFallsBackToPostgreSQL(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 8, QueueSize: 4})
	c := attach(t, h, f, "overflow", false, true)
	publishEach(h, f.send(t, 500))
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 500), 1, 500)
}

func TestWindowBoundsUnackedPublishesAndASilentClientIsDisconnected(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 4, SlowTimeout: 300 * time.Millisecond})
	c := attach(t, h, f, "silent", false, false)
	publishEach(h, f.send(t, 20))
	select {
	case reason := <-c.closed:
		t.Logf("disconnected: %s", reason)
	case <-time.After(10 * time.Second):
		t.Fatal("a client that never acknowledges was not disconnected")
	}
	if n := c.unacked(); n != 4 {
		t.Fatalf("%d publishes written without acknowledgements, want the window of 4", n)
	}
}

// A client that left one delivery unacknowledged through a quiet stretch
// longer than SlowTimeout, then acknowledges a burst as it arrives, is
// not a slow consumer: the time without acknowledgements counts from when
// the window filled, not from the last acknowledgement before the quiet.
func TestAClientIdleWithOneDeliveryUnacknowledgedIsNotDisconnectedWhenABurstFillsItsWindow(t *testing.T) {
	f := setup(t)
	const slow = 400 * time.Millisecond
	h := newHub(t, f, delivery.Options{Window: 4, SlowTimeout: slow})
	c := attach(t, h, f, "idle", false, false)
	closed := func() bool { return len(c.closed) > 0 }
	publishEach(h, f.send(t, 1))
	waitSeqs(t, c, f.conv.ID, 1)
	testkit.Never(t, slow+200*time.Millisecond, "disconnected with one delivery in flight and a window of 4", closed)
	burst := f.send(t, 20)
	// From now on the client acknowledges everything it is sent, each
	// publish a tenth of SlowTimeout after it arrived.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var seen []time.Time
		acked := 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			all := c.packets()
			for len(seen) < len(all) {
				seen = append(seen, time.Now())
			}
			for acked < len(all) && time.Since(seen[acked]) >= slow/10 {
				h.Acked("idle", c, all[acked].PacketID)
				acked++
			}
		}
	}()
	publishEach(h, burst)
	deadline := time.Now().Add(10 * time.Second)
	for len(c.seqs(f.conv.ID)) < 21 {
		select {
		case reason := <-c.closed:
			t.Fatalf("disconnected (%s) after %d of 21 messages although it acknowledges each publish within a tenth of SlowTimeout", reason, len(c.seqs(f.conv.ID)))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d/21 messages", len(c.seqs(f.conv.ID)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantExactly(t, c.seqs(f.conv.ID), 1, 21)
}

func TestPersistentSessionResumesAfterItsLastAcknowledgedSeq(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 8, CursorFlush: 10 * time.Millisecond})
	c := attach(t, h, f, "phone", true, true)
	publishEach(h, f.send(t, 50))
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 50), 1, 50)
	// Every PUBACK in: what a client disconnecting with some on the way
	// has not acknowledged comes again, rightly.
	testkit.WaitFor(t, 10*time.Second, "the cursor stored at 50", func() bool {
		return pgtest.QueryOne[int64](t, f.pool, "SELECT COALESCE(max(delivered_seq), 0) FROM session_cursor WHERE client_id = 'phone'") == 50
	})
	h.Detach("phone", c)
	f.send(t, 30) // while offline: no notifications at all
	c2 := attach(t, h, f, "phone", true, true)
	wantExactly(t, waitSeqs(t, c2, f.conv.ID, 30), 51, 80)
}

func TestNonPersistentSessionStartsNow(t *testing.T) {
	f := setup(t)
	f.send(t, 10)
	h := newHub(t, f, delivery.Options{})
	c := attach(t, h, f, "fresh", false, true)
	publishEach(h, f.send(t, 5))
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 5), 11, 15)
}

func TestSessionThatFellBehindCatchesUpFromTheRecentCacheWithoutPostgreSQL(t *testing.T) {
	f := setup(t)
	reg := prometheus.NewRegistry()
	m := delivery.NewMetrics(reg)
	h := newHub(t, f, delivery.Options{Window: 8, Metrics: m})
	// The sender's own session shows when the fan-out has routed
	// everything.
	obs := attachUser(t, h, f, "observer", 1, false, true, true)
	// Not subscribed to its events topic yet, the session drops live
	// messages and only notes that it is behind...
	c := attachUser(t, h, f, "cached", 2, false, true, false)
	publishEach(h, f.send(t, 200))
	waitSeqs(t, obs, f.conv.ID, 200)
	if n := len(c.seqs(f.conv.ID)); n != 0 {
		t.Fatalf("%d messages delivered before the subscription", n)
	}
	// ...and once subscribed it catches up, all from memory: the hub's
	// cache saw every one of them.
	h.SetReady("cached", c, true)
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 200), 1, 200)
	if hits := testutil.ToFloat64(m.RecentHits); hits != 200 {
		t.Fatalf("%v messages from the recent cache, want all 200", hits)
	}
	if n := testutil.ToFloat64(m.Replayed); n != 0 {
		t.Fatalf("%v messages read back from PostgreSQL although the cache held them all", n)
	}
}

func TestOverflowedSessionCatchesUpMostlyFromTheRecentCache(t *testing.T) {
	f := setup(t)
	reg := prometheus.NewRegistry()
	m := delivery.NewMetrics(reg)
	h := newHub(t, f, delivery.Options{Window: 8, QueueSize: 4, Metrics: m})
	c := attach(t, h, f, "overflow", false, true)
	publishEach(h, f.send(t, 200))
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 200), 1, 200)
	// A queue overflow resyncs from PostgreSQL, whose last_seq (200 here)
	// can be ahead of the fan-out; until the cache catches up with it,
	// PostgreSQL answers. The cache still carries most of the catch-up.
	hits, replayed := testutil.ToFloat64(m.RecentHits), testutil.ToFloat64(m.Replayed)
	t.Logf("%v from the recent cache, %v from PostgreSQL", hits, replayed)
	if hits == 0 || replayed >= hits {
		t.Fatalf("%v messages from the cache and %v from PostgreSQL: the cache should carry the catch-up", hits, replayed)
	}
}

func TestRecentCacheDoesNotEndCatchUpBeforeWhatPostgreSQLHolds(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 8, QueueSize: 4})
	c := attach(t, h, f, "mixed", false, true)
	publishEach(h, f.send(t, 100)[:60])
	// 61..100 are committed but their notifications are lost; 101 then
	// arrives live. The cache holds 1..60 and must not be taken for the end.
	more := f.send(t, 1)
	h.Publish(more[0])
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 101), 1, 101)
}

func TestFullWindowRefillsInBurstsNotOnePublishPerAck(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 16})
	c := attach(t, h, f, "bursty", false, false)
	other, err := f.svc.CreateGroup(context.Background(), 1, "sentinel", []int64{3})
	if err != nil {
		t.Fatal(err)
	}
	watcher := attachUser(t, h, f, "watcher", 3, false, true, true)
	sentinel, err := f.svc.Send(context.Background(), chat.SendRequest{ConversationID: other.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "after"})
	if err != nil {
		t.Fatal(err)
	}
	publishEach(h, f.send(t, 100))
	// The hub fans out in publish order: once the sentinel reached its
	// session, all 100 are in bursty's mailbox, so the window below is one
	// that filled with more to send (otherwise messages reaching the
	// session after the acks go out at once, rightly: nothing was waiting).
	h.Publish(chat.MessageEvent(sentinel.Message))
	waitSeqs(t, watcher, other.ID, 1)
	testkit.WaitFor(t, 10*time.Second, "a full window", func() bool { return c.unacked() == 16 })
	snapshot := func() ([]chat.Packet, []int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return append([]chat.Packet(nil), c.got...), append([]int(nil), c.writes...)
	}
	got, writes := snapshot()
	// Three acknowledgements leave 13 of 16 in flight: below a quarter
	// window free, nothing more is written.
	for _, p := range got[:3] {
		h.Acked("bursty", c, p.PacketID)
	}
	time.Sleep(100 * time.Millisecond) // a negative check: give a wrong write the time to happen
	if n := c.unacked(); n != 16 {
		t.Fatalf("%d publishes written after 3 acks, want none beyond the first 16", n-16)
	}
	// The fourth frees a quarter window: four publishes, in one write.
	h.Acked("bursty", c, got[3].PacketID)
	testkit.WaitFor(t, 10*time.Second, "the refill", func() bool { return c.unacked() == 20 })
	_, after := snapshot()
	if len(after) != len(writes)+1 || after[len(after)-1] != 4 {
		t.Fatalf("writes went from %v to %v; want one more write of 4 publishes", writes, after)
	}
	// Everything still arrives, in order, once the client acknowledges.
	go func() {
		acked := 4
		for acked < 100 {
			all, _ := snapshot()
			for _, p := range all[acked:] {
				h.Acked("bursty", c, p.PacketID)
			}
			acked = len(all)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 100), 1, 100)
}

// slowMembers holds member lookups of one conversation until released.
type slowMembers struct {
	chat.DeliveryStore
	conv    int64
	release chan struct{}
}

func (s *slowMembers) Members(ctx context.Context, conv int64) (chat.Routing, error) {
	if conv == s.conv {
		select {
		case <-s.release:
		case <-ctx.Done():
			return chat.Routing{}, ctx.Err()
		}
	}
	return s.DeliveryStore.Members(ctx, conv)
}

// TestFanOutKeepsRoutingWhileAConversationsMembersLoad: the members of a
// conversation the hub has not seen yet are read by a loader, not by the
// fan-out goroutine; while that read hangs, other conversations' events
// are delivered at once, and the waiting conversation's events follow, in
// order, once its members are in.
func TestFanOutKeepsRoutingWhileAConversationsMembersLoad(t *testing.T) {
	f := setup(t)
	other, err := f.svc.CreateGroup(context.Background(), 1, "other", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowMembers{DeliveryStore: f.sessions, conv: f.conv.ID, release: make(chan struct{})}
	h := startHub(t, slow, delivery.Options{})
	c := attach(t, h, f, "c", false, true)

	publishEach(h, f.send(t, 3)) // f.conv: its members' lookup hangs
	start := time.Now()
	for i := range 3 {
		res, err := f.svc.Send(context.Background(), chat.SendRequest{ConversationID: other.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: fmt.Sprint("o", i)})
		if err != nil {
			t.Fatal(err)
		}
		h.Publish(chat.MessageEvent(res.Message))
	}
	wantExactly(t, waitSeqs(t, c, other.ID, 3), 1, 3)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("another conversation's events took %v behind the hanging member lookup", d)
	}
	if got := c.seqs(f.conv.ID); len(got) != 0 {
		t.Fatalf("conversation with hanging member lookup delivered %v before its members were known", got)
	}
	close(slow.release)
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 3), 1, 3)
}

// Phones and devices keep connections open and get a message a minute: an
// idle session holds no goroutine (its pump runs only while there is work)
// and no buffers sized for a burst.
func TestIdleSessionsHoldNoGoroutineAndLittleMemory(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{})
	const n = 500
	conns := make([]*fakeConn, n)
	for i := range conns {
		conns[i] = attach(t, h, f, fmt.Sprint("idle-", i), true, true)
	}
	publishEach(h, f.send(t, 1))
	for i, c := range conns {
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("session %d to get the message", i), func() bool { return len(c.seqs(f.conv.ID)) > 0 })
	}
	// Every delivery was acknowledged: the pumps have nothing left to do.
	base := runtime.NumGoroutine()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := runtime.NumGoroutine()
		if g < n/10 {
			t.Logf("%d goroutines for %d idle sessions (%d when the last delivery arrived)", g, n, base)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines for %d idle sessions: a pump per session", g, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	more := make([]*fakeConn, n)
	for i := range more {
		more[i] = attach(t, h, f, fmt.Sprint("more-", i), true, true)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes of heap per idle session (the test's connection and PostgreSQL rows included)", per)
	if per > 8<<10 {
		t.Fatalf("%d bytes of heap per idle session, want at most 8 KiB", per)
	}
	runtime.KeepAlive(more)
}

// countConn counts the publishes written to it and acknowledges them.
type countConn struct {
	hub *delivery.Hub
	id  string
	n   atomic.Int64
}

func (c *countConn) Write(_ []chat.Ack, ps []chat.Packet) error {
	for _, p := range ps {
		if p.QoS > 0 {
			c.hub.Acked(c.id, c, p.PacketID)
		}
	}
	c.n.Add(int64(len(ps)))
	return nil
}

func (c *countConn) Close(string) {}

// BenchmarkFanOut is the third stage of a message's path: a committed
// message event encoded once, put in the recent cache and routed to the
// two members' sessions, whose pumps write it and take the PUBACKs (the
// connection here only counts; BenchmarkPublishEncode in hooks is the
// write's encoding).
func BenchmarkFanOut(b *testing.B) {
	f := setup(b)
	h := startHub(b, f.sessions, delivery.Options{})
	ctx := context.Background()
	var conns []*countConn
	for _, u := range []int64{1, 2} {
		id := fmt.Sprint("bench-", u)
		if _, err := f.sessions.Open(ctx, id, "", u, false, false, time.Hour); err != nil {
			b.Fatal(err)
		}
		c := &countConn{hub: h, id: id}
		h.Attach(c, id, u, false, true, 0)
		<-h.Session(id).Loaded()
		conns = append(conns, c)
	}
	var last int64
	_ = f.pool.QueryRow(ctx, "SELECT last_seq FROM conversation WHERE id = $1", f.conv.ID).Scan(&last)
	now := time.Now()
	msg := chat.Message{ConversationID: f.conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: strings.Repeat("x", 100), CreatedAt: now}
	b.ReportAllocs()
	b.ResetTimer()
	// At most 256 events ahead of the slower session: beyond its queue a
	// session would fall back to PostgreSQL, which does not have these.
	caughtUp := func(n int64) {
		for _, c := range conns {
			for c.n.Load() < n {
				runtime.Gosched()
			}
		}
	}
	for i := range b.N {
		msg.Seq = last + int64(i) + 1
		h.Publish(chat.MessageEvent(msg))
		if i%256 == 255 {
			caughtUp(int64(i + 1 - 256))
		}
	}
	caughtUp(int64(b.N))
}

// downCursors is the session store while PostgreSQL is down: positions
// cannot be read.
type downCursors struct {
	chat.DeliveryStore
	down atomic.Bool
}

func (s *downCursors) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	if s.down.Load() {
		return nil, errors.New("connect to PostgreSQL: connection refused")
	}
	return s.DeliveryStore.Cursors(ctx, clientID, userID, stored)
}

// TestAcknowledgementsAreWrittenWhileTheSessionsPositionsCannotLoad: a
// client that connects as PostgreSQL goes down still hears its sends
// refused; its PUBACKs do not wait for the session's positions.
func TestAcknowledgementsAreWrittenWhileTheSessionsPositionsCannotLoad(t *testing.T) {
	f := setup(t)
	st := &downCursors{DeliveryStore: f.sessions}
	st.down.Store(true)
	h := startHub(t, st, delivery.Options{})
	c := newConn("c", true)
	c.hub = h
	h.Attach(c, "c", 2, false, true, 0)
	sent := make(chan error, 1)
	h.Reply("c", c, []chat.Ack{{PacketID: 7, Reason: 0x80, Message: "unavailable", Sent: func(err error) { sent <- err }}})
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("PUBACK not written: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the PUBACK waited for the session's positions")
	}
	st.down.Store(false)
	testkit.Receive(t, h.Session("c").Loaded(), 10*time.Second, "positions not loaded after PostgreSQL came back")
}

// stepConn is a fakeConn whose every write waits for the test: it hands
// the write's acknowledgements to writes and goes on when step receives.
type stepConn struct {
	*fakeConn
	writes chan []chat.Ack
	step   chan struct{}
}

func (c *stepConn) Write(a []chat.Ack, ps []chat.Packet) error {
	c.writes <- a
	<-c.step
	return c.fakeConn.Write(a, ps)
}

// Every acknowledgement handed to a session hears whether it was written
// (a traced publish ends its span then), including those that reach it
// while it stops or after: the hub found the session before it stopped.
func TestEveryAcknowledgementHandedToAStoppingSessionHearsWhetherItWasWritten(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{})
	if _, err := f.sessions.Open(context.Background(), "c", "", 2, false, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	c := &stepConn{fakeConn: newConn("c", true), writes: make(chan []chat.Ack, 8), step: make(chan struct{})}
	c.hub, c.self = h, c
	h.Attach(c, "c", 2, false, true, 0)
	sess := h.Session("c")
	<-sess.Loaded()
	type outcome struct {
		id  uint16
		err error
	}
	sent := make(chan outcome, 8)
	ack := func(id uint16) []chat.Ack {
		return []chat.Ack{{PacketID: id, Sent: func(err error) { sent <- outcome{id, err} }}}
	}
	written := func() []chat.Ack {
		t.Helper()
		select {
		case a := <-c.writes:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no write")
			return nil
		}
	}
	h.Reply("c", c, ack(1))
	written() // the pump writes 1 and waits
	h.Reply("c", c, ack(2))
	go h.Detach("c", c)
	testkit.WaitFor(t, 10*time.Second, "Detach to ask the session to stop", sess.StopRequested)
	c.step <- struct{}{}
	written() // the stopping session writes 2 and waits
	h.Reply("c", c, ack(3))
	c.step <- struct{}{}
	testkit.Receive(t, sess.Done(), 10*time.Second, "the session did not stop")
	sess.Reply(ack(4))
	want := map[uint16]bool{1: true, 2: true, 3: false, 4: false} // written or not
	for range want {
		select {
		case o := <-sent:
			if w := want[o.id]; w != (o.err == nil) {
				t.Fatalf("acknowledgement %d: Sent(%v), want written %v", o.id, o.err, w)
			}
			delete(want, o.id)
		case <-time.After(5 * time.Second):
			t.Fatalf("acknowledgements %v never heard whether they were written", want)
		}
	}
}

// gatedCursors is the session store while reading positions is slow: a
// Cursors call waits until open is closed.
type gatedCursors struct {
	chat.DeliveryStore
	open chan struct{}
}

func (s *gatedCursors) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	<-s.open
	return s.DeliveryStore.Cursors(ctx, clientID, userID, stored)
}

// cleanSessionReadingItsPositions attaches a clean session of user 2
// whose read of its starting positions waits until st.open is closed; one
// message was committed before its client connected (not owed).
func cleanSessionReadingItsPositions(t *testing.T) (fixture, *gatedCursors, *delivery.Hub, *fakeConn) {
	t.Helper()
	f := setup(t)
	f.send(t, 1)
	st := &gatedCursors{DeliveryStore: f.sessions, open: make(chan struct{})}
	h := startHub(t, st, delivery.Options{})
	c := newConn("c", true)
	c.hub = h
	h.Attach(c, "c", 2, false, true, 0)
	return f, st, h, c
}

// wantDelivered fails unless c got exactly evs's seqs of conv, in order.
func wantDelivered(t *testing.T, c *fakeConn, conv int64, evs []chat.Event) {
	t.Helper()
	got := waitSeqs(t, c, conv, len(evs))
	if len(got) != len(evs) {
		t.Fatalf("delivered seqs %v, want %d of them", got, len(evs))
	}
	for i, ev := range evs {
		if got[i] != ev.Seq {
			t.Fatalf("delivered seqs %v, want %d at %d", got, ev.Seq, i)
		}
	}
}

// TestACleanSessionGetsAMessageCommittedWhileItReadItsPositions: a
// session without stored cursors starts at each conversation's last_seq
// as it reads it, after its client connected; a message committed and
// routed to it before that read returned is in that last_seq, yet its
// client was connected and subscribed when it committed: it is delivered.
func TestACleanSessionGetsAMessageCommittedWhileItReadItsPositions(t *testing.T) {
	f, st, h, c := cleanSessionReadingItsPositions(t)
	evs := f.send(t, 2)
	publishEach(h, evs)
	deadline := time.Now().Add(10 * time.Second)
	for h.Session("c").Queued() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d items routed to the session", h.Session("c").Queued())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(st.open)
	wantDelivered(t, c, f.conv.ID, evs)
}

// TestACleanSessionGetsAMessageCommittedBeforeItReadItsPositionsButRoutedAfter:
// the fan-out may route an entry after the session read its start (the
// relay brings it from another node, or its members were loading), so
// that entry is in the last_seq the session starts at although its client
// was connected when it committed: it is delivered all the same, in order.
func TestACleanSessionGetsAMessageCommittedBeforeItReadItsPositionsButRoutedAfter(t *testing.T) {
	f, st, h, c := cleanSessionReadingItsPositions(t)
	evs := f.send(t, 2) // committed after the connect, routed after the read
	close(st.open)
	<-h.Session("c").Loaded()
	publishEach(h, evs)
	wantDelivered(t, c, f.conv.ID, evs)
}

// stuckConn is a client whose socket takes no more bytes: every write
// blocks until the test ends.
type stuckConn struct {
	release <-chan struct{}
	writing *atomic.Int32 // writes begun, across all stuck clients
}

func (c stuckConn) Write([]chat.Ack, []chat.Packet) error {
	c.writing.Add(1)
	<-c.release
	return fmt.Errorf("closed")
}
func (c stuckConn) Close(string) {}

func TestAPumpStartsAtOnceWhileEveryPumpWorkerIsBlockedOnASlowClient(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the hub closes (cleanups run last first)
	fast := attach(t, h, f, "fast", true, true)
	// More stuck clients than the hub has pump workers.
	const stuck = 40
	var writing atomic.Int32
	for i := range stuck {
		id := fmt.Sprint("stuck-", i)
		if _, err := f.sessions.Open(context.Background(), id, "", 2, true, false, time.Hour); err != nil {
			t.Fatal(err)
		}
		h.Attach(stuckConn{release, &writing}, id, 2, true, true, 0)
		testkit.Receive(t, h.Session(id).Loaded(), 10*time.Second, "a stuck session never loaded its positions")
	}
	publishEach(h, f.send(t, 1))
	waitSeqs(t, fast, f.conv.ID, 1)
	deadline := time.Now().Add(10 * time.Second)
	for writing.Load() < stuck {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d stuck pumps are writing", writing.Load(), stuck)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Every pump worker is blocked writing to a stuck client, and the fast
	// client's pump, idle since it was acknowledged, has a message again.
	publishEach(h, f.send(t, 1))
	wantExactly(t, waitSeqs(t, fast, f.conv.ID, 2), 1, 2)
}

// blockedConn is a client whose socket takes no more bytes: a write blocks
// until the connection is closed, as the chat.Conn contract has it.
type blockedConn struct {
	closed, writing  chan struct{}
	closeOnce, wOnce sync.Once
	reason           atomic.Value
}

func newBlockedConn() *blockedConn {
	return &blockedConn{closed: make(chan struct{}), writing: make(chan struct{})}
}

func (c *blockedConn) Write([]chat.Ack, []chat.Packet) error {
	c.wOnce.Do(func() { close(c.writing) })
	<-c.closed
	return errors.New("closed")
}

func (c *blockedConn) Close(reason string) {
	c.closeOnce.Do(func() {
		c.reason.Store(reason)
		close(c.closed)
	})
}

// A graceful shutdown stops every session, which writes its last
// acknowledgements and saves its cursors. A session whose write to a dead
// client is blocked (its socket buffer full) cannot stop until that write
// ends, and the watchdog ends it only after SlowTimeout (30 s): longer than
// the whole shutdown budget, which the hub's Close then spent waiting,
// leaving nothing for the rest of the shutdown.
func TestClosingTheHubDoesNotWaitOutItsBudgetOnAClientWhoseWriteIsBlocked(t *testing.T) {
	f := setup(t)
	h := delivery.NewHub(f.sessions, delivery.Options{})
	ok := attach(t, h, f, "ok", true, true)
	if _, err := f.sessions.Open(context.Background(), "dead", "", 2, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	dead := newBlockedConn()
	t.Cleanup(func() { dead.Close("test over") })
	h.Attach(dead, "dead", 2, true, true, 0)
	<-h.Session("dead").Loaded()
	publishEach(h, f.send(t, 1))
	waitSeqs(t, ok, f.conv.ID, 1)
	testkit.Receive(t, dead.writing, 10*time.Second, "the dead client's session never wrote")

	const budget = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	err := h.Close(ctx)
	took := time.Since(start)
	if err != nil || took > budget/2 {
		t.Fatalf("Close took %v of its %v budget: %v (a write blocked on a dead client held it)", took.Round(time.Millisecond), budget, err)
	}
	t.Logf("closed in %v; the blocked client was closed: %v", took.Round(time.Millisecond), dead.reason.Load())
}

// stackSink tells, for each delivered watermark, whether it was recorded
// on the goroutine that handed the PUBACK to the hub.
type stackSink chan bool

func (s stackSink) Delivered(_, _, _ int64) {
	buf := make([]byte, 64<<10)
	select {
	case s <- strings.Contains(string(buf[:runtime.Stack(buf, false)]), "delivery.(*Hub).Acked"):
	default:
	}
}

// Most PUBACKs reach a session that has written what it had: taking one
// is bookkeeping, and a pump woken for it costs a goroutine hand-off per
// delivery.
func TestAPubackToAnIdleSessionIsTakenWithoutWakingItsPump(t *testing.T) {
	f := setup(t)
	sink := make(stackSink, 16)
	h := newHub(t, f, delivery.Options{Delivered: sink})
	c := attach(t, h, f, "acker", true, false)
	publishEach(h, f.send(t, 1))
	waitSeqs(t, c, f.conv.ID, 1)
	var id uint16
	for _, p := range c.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.Type == chat.EventMessageNew {
			id = p.PacketID
		}
	}
	sess := h.Session("acker")
	testkit.WaitFor(t, 10*time.Second, "the pump to go idle after writing the message", func() bool { return !sess.Pumping() })
	h.Acked("acker", c.self, id)
	select {
	case onAcker := <-sink:
		if !onAcker {
			t.Fatal("the delivered watermark was recorded by a pump woken for the PUBACK, not by the goroutine that handed it over")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the PUBACK never reached the delivered watermark")
	}
}

// clientConn acknowledges what is written to it from a goroutine of its
// own, as a client's PUBACKs come in on the connection's read loop, and
// tells acked each time a PUBACK was handed over.
type clientConn struct {
	hub   *delivery.Hub
	id    string
	ids   chan uint16
	acked chan struct{}
}

func newClientConn(h *delivery.Hub, id string) *clientConn {
	c := &clientConn{hub: h, id: id, ids: make(chan uint16, 1024), acked: make(chan struct{}, 1024)}
	go func() {
		for pid := range c.ids {
			c.hub.Acked(c.id, c, pid)
			c.acked <- struct{}{}
		}
	}()
	return c
}

func (c *clientConn) Write(_ []chat.Ack, ps []chat.Packet) error {
	for _, p := range ps {
		if p.QoS > 0 {
			c.ids <- p.PacketID
		}
	}
	return nil
}

func (c *clientConn) Close(string) {}

// BenchmarkFanOutOneAtATime is BenchmarkFanOut at a moderate rate: each
// message is routed to the two members' sessions, written and acknowledged
// by the clients, and the sessions have gone idle, before the next is
// published, as most deliveries find their session at 1,000 msgs/s among
// 200 clients. cpu-ns/op is
// the process's CPU (every goroutine's, from getrusage) per message.
// Under convs=1000 the two users share 999 more conversations, quiet
// ones: a session follows each.
func BenchmarkFanOutOneAtATime(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprint("convs=", n), func(b *testing.B) { benchFanOutOneAtATime(b, n) })
	}
}

func benchFanOutOneAtATime(b *testing.B, convs int) {
	f := setup(b)
	h := startHub(b, f.sessions, delivery.Options{})
	ctx := context.Background()
	for range convs - 1 {
		if _, err := f.svc.CreateGroup(ctx, 1, "quiet", []int64{2}); err != nil {
			b.Fatal(err)
		}
	}
	var conns []*clientConn
	for _, u := range []int64{1, 2} {
		id := fmt.Sprint("bench-", u)
		if _, err := f.sessions.Open(ctx, id, "", u, false, false, time.Hour); err != nil {
			b.Fatal(err)
		}
		c := newClientConn(h, id)
		h.Attach(c, id, u, false, true, 0)
		<-h.Session(id).Loaded()
		conns = append(conns, c)
	}
	b.Cleanup(func() {
		for _, c := range conns {
			close(c.ids)
		}
	})
	var last int64
	_ = f.pool.QueryRow(ctx, "SELECT last_seq FROM conversation WHERE id = $1", f.conv.ID).Scan(&last)
	msg := chat.Message{ConversationID: f.conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(), Body: strings.Repeat("x", 100), CreatedAt: time.Now()}
	b.ReportAllocs()
	before, scheduled := processCPU(), goroutinesScheduled()
	b.ResetTimer()
	for i := range b.N {
		msg.Seq = last + int64(i) + 1
		h.Publish(chat.MessageEvent(msg))
		for _, c := range conns {
			<-c.acked
		}
		// The sessions go idle before the next message, as they do
		// between a client's messages at a moderate rate.
		time.Sleep(200 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(goroutinesScheduled()-scheduled)/float64(b.N), "schedules/op")
}

// goroutinesScheduled counts the times a goroutine was put on a thread to
// run (runtime/metrics /sched/latencies:seconds holds one sample each):
// every wake-up of a goroutine, and every start.
func goroutinesScheduled() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	d, _ := testkit.ProcessCPU()
	return d
}

// recordSink records every delivered acknowledgement handed to it.
type recordSink struct {
	mu  sync.Mutex
	got []chat.MessageRef // ConversationID, Seq of user
	by  []int64
}

func (s *recordSink) Delivered(conv, user, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, chat.MessageRef{ConversationID: conv, Seq: seq})
	s.by = append(s.by, user)
}

// of returns the seqs of conv acknowledged for user.
func (s *recordSink) of(conv, user int64) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for i, r := range s.got {
		if r.ConversationID == conv && s.by[i] == user {
			out = append(out, r.Seq)
		}
	}
	return out
}

// ackAll acknowledges, in order, every QoS 1 publish c got so far.
func ackAll(h *delivery.Hub, id string, c *fakeConn, from int) int {
	ps := c.packets()
	for _, p := range ps[from:] {
		if p.QoS > 0 {
			h.Acked(id, c.self, p.PacketID)
		}
	}
	return len(ps)
}

// A user's delivered watermark says which of the others' entries reached
// them: their sessions' acknowledgements of what they wrote themselves
// (their sent messages' echoes, on this and their other devices) are not
// handed to it. Writing an entry moved the writer's read watermark past it.
func TestTheSendersOwnEchoesDoNotReachTheDeliveredWatermark(t *testing.T) {
	f := setup(t)
	sink := &recordSink{}
	h := newHub(t, f, delivery.Options{Delivered: sink})
	sender := attachUser(t, h, f, "sender", 1, true, false, true)
	other := attachUser(t, h, f, "other", 2, true, false, true)
	own := f.send(t, 3) // by user 1
	publishEach(h, own)
	waitSeqs(t, sender, f.conv.ID, 3)
	waitSeqs(t, other, f.conv.ID, 3)
	ackAll(h, "other", other, 0)
	n := ackAll(h, "sender", sender, 0)
	res, err := f.svc.Send(context.Background(), chat.SendRequest{ConversationID: f.conv.ID, SenderID: 2, ClientMsgID: uuid.NewString(), Body: "reply"})
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(chat.MessageEvent(res.Message))
	waitSeqs(t, sender, f.conv.ID, 4)
	ackAll(h, "sender", sender, n)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(sink.of(f.conv.ID, 1), res.Message.Seq) || len(sink.of(f.conv.ID, 2)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("acknowledgements of others' entries never reached the sink: user 1 %v, user 2 %v", sink.of(f.conv.ID, 1), sink.of(f.conv.ID, 2))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, ev := range own {
		if slices.Contains(sink.of(f.conv.ID, 1), ev.Seq) {
			t.Fatalf("the sender's acknowledgement of their own message %d reached the delivered watermark: %v", ev.Seq, sink.of(f.conv.ID, 1))
		}
	}
	if got := sink.of(f.conv.ID, 2); !slices.Equal(got, []int64{own[0].Seq, own[1].Seq, own[2].Seq}) {
		t.Fatalf("the recipient's acknowledgements reached the sink as %v, want %d..%d", got, own[0].Seq, own[2].Seq)
	}
}

// A client that connects while the hub closes (the broker still accepts
// it) must not get a session that outlives Close: nothing would stop it,
// its reads would fail for ever on the hub's cancelled context, and its
// cursors would go to a closed writer. Attach refuses it.
func TestAClientAttachingWhileTheHubClosesGetsNoSession(t *testing.T) {
	f := setup(t)
	h := delivery.NewHub(f.sessions, delivery.Options{})
	if _, err := f.sessions.Open(context.Background(), "dead", "", 2, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	dead := newBlockedConn() // holds Close for a second (closeWriteGrace)
	t.Cleanup(func() { dead.Close("test over") })
	h.Attach(dead, "dead", 2, true, true, 0)
	<-h.Session("dead").Loaded()
	h.SendDirect("dead", dead, chat.Packet{Topic: "x", Payload: []byte("{}")})
	<-dead.writing

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- h.Close(ctx)
	}()
	testkit.WaitFor(t, 5*time.Second, "Close to begin stopping the sessions", func() bool {
		s := h.Session("dead")
		return s == nil || s.StopRequested()
	})
	if _, err := f.sessions.Open(context.Background(), "late", "", 2, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	late := newConn("late", true)
	late.hub = h
	if err := h.Attach(late, "late", 2, true, true, 0); !errors.Is(err, delivery.ErrClosed) || !errors.Is(err, chat.ErrUnavailable) {
		t.Errorf("Attach while the hub closes: %v, want delivery.ErrClosed (unavailable)", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if s := h.Session("late"); s != nil {
		select {
		case <-s.Done():
		default:
			t.Fatal("a session attached while the hub closed still runs after Close returned")
		}
	}
}

// Closing the hub stops every session, and each writes its delivered
// cursors before Close returns: a node shutting down cleanly sends none
// of its clients again what they acknowledged (CursorFlush is only what
// a crash costs).
func TestClosingTheHubWritesTheDeliveredCursorsOfTheSessionsItStops(t *testing.T) {
	f := setup(t)
	sink := &recordSink{}
	h := delivery.NewHub(f.sessions, delivery.Options{CursorFlush: time.Minute, Delivered: sink})
	c := attach(t, h, f, "phone", true, true)
	evs := f.send(t, 5)
	publishEach(h, evs)
	last := evs[len(evs)-1].Seq
	testkit.WaitFor(t, 10*time.Second, "every delivery acknowledged", func() bool {
		return slices.Contains(sink.of(f.conv.ID, 2), last)
	})
	waitSeqs(t, c, f.conv.ID, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var cursor int64
	if err := f.pool.QueryRow(ctx, "SELECT delivered_seq FROM session_cursor WHERE client_id = 'phone' AND conversation_id = $1", f.conv.ID).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	if cursor != last {
		t.Fatalf("the stored cursor is %d after Close, want %d (everything acknowledged)", cursor, last)
	}
}
