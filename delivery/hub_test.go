package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/delivery"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeConn records what the pump writes and acknowledges it (or not),
// standing in for a client socket; the store behind the hub is real.
type fakeConn struct {
	hub    *delivery.Hub
	id     string
	ack    bool
	mu     sync.Mutex
	got    []delivery.Packet
	closed chan string
}

func newConn(id string, ack bool) *fakeConn {
	return &fakeConn{id: id, ack: ack, closed: make(chan string, 1)}
}

func (c *fakeConn) WritePublishes(ps []delivery.Packet) error {
	select {
	case <-c.closed:
		return fmt.Errorf("closed")
	default:
	}
	c.mu.Lock()
	c.got = append(c.got, ps...)
	c.mu.Unlock()
	for _, p := range ps {
		if c.ack && p.QoS > 0 {
			go c.hub.Ack(c.id, p.PacketID)
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

func (c *fakeConn) unacked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

type fixture struct {
	st       *store.Store
	sessions *store.Sessions
	svc      *chat.Service
	conv     chat.Conversation
}

func setup(t *testing.T) fixture {
	t.Helper()
	pool := pgtest.NewPool(t)
	st := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	svc := chat.NewService(st, nil, chat.DefaultLimits())
	conv, err := svc.CreateGroup(context.Background(), 1, "pump", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{st: st, sessions: store.NewSessions(pool), svc: svc, conv: conv}
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

func newHub(t *testing.T, f fixture, o delivery.Options) *delivery.Hub {
	t.Helper()
	h := delivery.NewHub(f.sessions, f.st, o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	return h
}

func attach(t *testing.T, h *delivery.Hub, f fixture, id string, persistent, ack bool) *fakeConn {
	t.Helper()
	if _, err := f.sessions.Open(context.Background(), id, 2, persistent, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	c := newConn(id, ack)
	c.hub = h
	sess := h.Attach(c, id, 2, persistent, true)
	select {
	case <-sess.Loaded():
	case <-time.After(10 * time.Second):
		t.Fatal("session never loaded its positions")
	}
	return c
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
			h.Notify(ev)
			if rng.Intn(10) == 0 {
				h.Notify(ev)
			}
		}
		i = j
	}
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 300), 1, 300)
	// A late duplicate changes nothing.
	h.Notify(evs[0])
	h.Notify(evs[299])
	for _, ev := range f.send(t, 1) {
		h.Notify(ev)
	}
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 301), 1, 301)
}

func TestQueueOverflowFallsBackToPostgreSQL(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 8, QueueSize: 4})
	c := attach(t, h, f, "overflow", false, true)
	for _, ev := range f.send(t, 500) {
		h.Notify(ev)
	}
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 500), 1, 500)
}

func TestWindowBoundsUnackedPublishesAndASilentClientIsDisconnected(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 4, SlowTimeout: 300 * time.Millisecond})
	c := attach(t, h, f, "silent", false, false)
	for _, ev := range f.send(t, 20) {
		h.Notify(ev)
	}
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

func TestPersistentSessionResumesAfterItsLastAcknowledgedSeq(t *testing.T) {
	f := setup(t)
	h := newHub(t, f, delivery.Options{Window: 8, CursorFlush: 10 * time.Millisecond})
	c := attach(t, h, f, "phone", true, true)
	for _, ev := range f.send(t, 50) {
		h.Notify(ev)
	}
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 50), 1, 50)
	h.Detach("phone", c) // flushes the cursor
	f.send(t, 30)        // while offline: no notifications at all
	c2 := attach(t, h, f, "phone", true, true)
	wantExactly(t, waitSeqs(t, c2, f.conv.ID, 30), 51, 80)
}

func TestNonPersistentSessionStartsNow(t *testing.T) {
	f := setup(t)
	f.send(t, 10)
	h := newHub(t, f, delivery.Options{})
	c := attach(t, h, f, "fresh", false, true)
	for _, ev := range f.send(t, 5) {
		h.Notify(ev)
	}
	wantExactly(t, waitSeqs(t, c, f.conv.ID, 5), 11, 15)
}
