package presence

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/testkit"
)

// fakeStore keeps the flags in memory; every user watches every other.
type fakeStore struct {
	mu        sync.Mutex
	flags     map[string]string // client id -> node
	elsewhere map[int64]bool
	seen      map[int64]int
	removed   bool
	// claimFails is how many ClaimOffline calls fail still (a database
	// out of reach).
	claimFails int
	// claimOnlineFails is how many ClaimOnline calls fail still.
	claimOnlineFails int
	// revive makes the next Heartbeat report this node revived (another
	// took it for dead).
	revive bool
	// reaped is what the next ReapNodes returns (a dead node's users).
	reaped map[int64]time.Time
	// hold, when set, keeps Watchers waiting until it is closed (a slow
	// database).
	hold chan struct{}
}

func (f *fakeStore) Heartbeat(context.Context, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	revived := f.revive
	f.revive = false
	return revived, nil
}
func (f *fakeStore) ResetNode(_ context.Context, node string, remove bool) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.flags {
		if n == node {
			delete(f.flags, id)
		}
	}
	f.removed = f.removed || remove
	return nil, nil
}
func (f *fakeStore) SetConnections(_ context.Context, node string, connected, _, disconnected []string, seen []int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range connected {
		f.flags[id] = node
	}
	for _, id := range disconnected {
		if f.flags[id] == node {
			delete(f.flags, id)
		}
	}
	for _, u := range seen {
		f.seen[u]++
	}
	return nil
}
func (f *fakeStore) ClaimOnline(_ context.Context, users []int64) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimOnlineFails > 0 {
		f.claimOnlineFails--
		return nil, fmt.Errorf("database out of reach")
	}
	var out []int64
	for _, u := range users {
		if !f.elsewhere[u] {
			out = append(out, u)
		}
	}
	return out, nil
}
func (f *fakeStore) ClaimOffline(_ context.Context, _ string, users []int64) (map[int64]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimFails > 0 {
		f.claimFails--
		return nil, fmt.Errorf("database out of reach")
	}
	out := map[int64]time.Time{}
	for _, u := range users {
		if !f.elsewhere[u] {
			out[u] = time.Time{}
		}
	}
	return out, nil
}
func (f *fakeStore) Reassert(_ context.Context, node string, clients, _ []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range clients {
		if _, held := f.flags[id]; !held {
			f.flags[id] = node
		}
	}
	return nil
}
func (f *fakeStore) ReapNodes(context.Context, string) (map[int64]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reaped
	f.reaped = nil
	return out, nil
}
func (f *fakeStore) Watchers(_ context.Context, users []int64, _ int) (map[int64][]int64, error) {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	out := map[int64][]int64{}
	for _, u := range users {
		out[u] = []int64{100}
	}
	return out, nil
}
func (f *fakeStore) Watching(_ context.Context, subjects, watchers, _ []int64, _ int) (map[int64][]int64, error) {
	out := map[int64][]int64{}
	for i, u := range subjects {
		if watchers[i] == 100 {
			out[u] = []int64{100}
		}
	}
	return out, nil
}
func (f *fakeStore) HiddenFrom(_ context.Context, users []int64, _ int) (map[int64][]int64, error) {
	out := map[int64][]int64{}
	for _, u := range users {
		out[u] = []int64{200}
	}
	return out, nil
}
func (f *fakeStore) Presence(_ context.Context, u int64) (chat.Presence, error) {
	return chat.Presence{UserID: u}, nil
}
func (f *fakeStore) Announced(_ context.Context, users []int64) ([]chat.Presence, error) {
	out := make([]chat.Presence, len(users))
	for i, u := range users {
		out[i] = chat.Presence{UserID: u}
	}
	return out, nil
}
func (f *fakeStore) SharesConversation(context.Context, int64, int64) (bool, error) {
	return true, nil
}

type fakeHub struct {
	mu  sync.Mutex
	evs []chat.Event
}

func (h *fakeHub) Publish(evs ...chat.Event) {
	h.mu.Lock()
	h.evs = append(h.evs, evs...)
	h.mu.Unlock()
}

func (h *fakeHub) events() []chat.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chat.Event(nil), h.evs...)
}

func newTracker(t *testing.T, cfg Config) (*Tracker, *fakeStore, *fakeHub) {
	t.Helper()
	st := &fakeStore{flags: map[string]string{}, elsewhere: map[int64]bool{}, seen: map[int64]int{}}
	hub := &fakeHub{}
	cfg.NodeID, cfg.Store, cfg.Hub = "n1", st, hub
	if cfg.Grace == 0 {
		cfg.Grace = 100 * time.Millisecond
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	return tr, st, hub
}

func waitEvents(t *testing.T, hub *fakeHub, n int) []chat.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(hub.events()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d events, want %d: %+v", len(hub.events()), n, hub.events())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return hub.events()
}

func TestTrackerCountsConnectionsAndDebouncesOffline(t *testing.T) {
	tr, st, hub := newTracker(t, Config{})
	tr.Connected("a", "", 1)
	tr.Connected("b", "", 1)
	evs := waitEvents(t, hub, 1)
	if evs[0].UserID != 1 || !*evs[0].Online {
		t.Fatalf("online event %+v", evs[0])
	}
	tr.Disconnected("a", 1)
	time.Sleep(300 * time.Millisecond)
	if len(hub.events()) != 1 || !tr.Online(1) {
		t.Fatalf("one of two devices left: %+v", hub.events())
	}
	// A takeover: the new connection of "b" arrives before the old one leaves.
	tr.Connected("b", "", 1)
	tr.Disconnected("b", 1)
	time.Sleep(300 * time.Millisecond)
	st.mu.Lock()
	flag := st.flags["b"]
	st.mu.Unlock()
	if flag != "n1" || len(hub.events()) != 1 {
		t.Fatalf("after a takeover: flag %q, events %+v", flag, hub.events())
	}
	tr.Disconnected("b", 1)
	evs = waitEvents(t, hub, 2)
	if *evs[1].Online || evs[1].LastSeen == nil || tr.Online(1) {
		t.Fatalf("offline event %+v", evs[1])
	}
	st.mu.Lock()
	if len(st.flags) != 0 || st.seen[1] == 0 {
		t.Fatalf("flags %v, seen %v", st.flags, st.seen)
	}
	st.mu.Unlock()

	// Back within the grace: nothing is announced either way.
	tr.Connected("c", "", 2)
	waitEvents(t, hub, 3)
	tr.Disconnected("c", 2)
	tr.Connected("c", "", 2)
	time.Sleep(300 * time.Millisecond)
	if n := len(hub.events()); n != 3 {
		t.Fatalf("a reconnect within the grace was announced: %+v", hub.events())
	}
	// Online on another node: no offline event from here.
	st.mu.Lock()
	st.elsewhere[2] = true
	st.mu.Unlock()
	tr.Disconnected("c", 2)
	time.Sleep(300 * time.Millisecond)
	if n := len(hub.events()); n != 3 {
		t.Fatalf("offline announced while online elsewhere: %+v", hub.events())
	}
	// Remote events are pushed as they are.
	online := true
	tr.Remote(chat.Event{Type: chat.EventPresence, UserID: 9, Online: &online})
	tr.Remote(chat.Event{Type: chat.EventTyping, UserID: 9})
	if evs := waitEvents(t, hub, 4); evs[3].UserID != 9 {
		t.Fatalf("remote event %+v", evs[3])
	}
	if err := tr.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !st.removed {
		t.Fatal("Close did not remove the node")
	}
}

// TestAUserWhoseOfflineClaimFailedIsStillAnnouncedOffline: the claim of
// a user's departure fails once (the database briefly out of reach). The
// claim is retried: else the watchers, told the user was online, would
// show them online until they asked, and no node would ever tell them
// otherwise (the user's flag still says announced online).
func TestAUserWhoseOfflineClaimFailedIsStillAnnouncedOffline(t *testing.T) {
	tr, st, hub := newTracker(t, Config{})
	tr.Connected("a", "", 1)
	waitEvents(t, hub, 1)
	st.mu.Lock()
	st.claimFails = 1
	st.mu.Unlock()
	tr.Disconnected("a", 1)
	evs := waitEvents(t, hub, 2)
	if evs[1].UserID != 1 || *evs[1].Online {
		t.Fatalf("second event %+v, want user 1 offline", evs[1])
	}
}

// TestADeadNodesUserWhoseOfflineClaimFailedIsStillAnnouncedOffline: the
// users a crashed node left are claimed offline by the node that reaps
// it; that claim fails once. It is retried: no other node will announce
// them, the dead node's connections being cleared already.
func TestADeadNodesUserWhoseOfflineClaimFailedIsStillAnnouncedOffline(t *testing.T) {
	_, st, hub := newTracker(t, Config{Heartbeat: 20 * time.Millisecond})
	left := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	st.mu.Lock()
	st.claimFails = 1
	st.reaped = map[int64]time.Time{7: left}
	st.mu.Unlock()
	evs := waitEvents(t, hub, 1)
	if evs[0].UserID != 7 || *evs[0].Online || !evs[0].LastSeen.Equal(left) {
		t.Fatalf("event %+v, want user 7 offline, last seen %v", evs[0], left)
	}
}

// TestARevivedNodesUsersAreAnnouncedOnlineAgainThoughTheFirstClaimFailed:
// another node took this one for dead and announced its users offline;
// this node's next heartbeat finds that out (revived) and announces them
// online again, but that claim fails once. The announcement is retried at
// a later heartbeat: the heartbeat says revived only once, and the users,
// connected here all along, would show offline until they reconnected.
func TestARevivedNodesUsersAreAnnouncedOnlineAgainThoughTheFirstClaimFailed(t *testing.T) {
	tr, st, hub := newTracker(t, Config{Heartbeat: 20 * time.Millisecond})
	tr.Connected("a", "", 1)
	waitEvents(t, hub, 1)
	st.mu.Lock()
	st.claimOnlineFails = 1
	st.revive = true
	st.mu.Unlock()
	evs := waitEvents(t, hub, 2)
	if evs[1].UserID != 1 || !*evs[1].Online {
		t.Fatalf("second event %+v, want user 1 online", evs[1])
	}
}

func TestTrackerWithoutPushKeepsState(t *testing.T) {
	tr, st, hub := newTracker(t, Config{NoPush: true})
	tr.Connected("a", "", 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st.mu.Lock()
		flag := st.flags["a"]
		st.mu.Unlock()
		if flag == "n1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("connection flag not written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if len(hub.events()) != 0 {
		t.Fatalf("events pushed with NoPush: %+v", hub.events())
	}
}

// A node's connections come and go in bursts (a restart, a cell tower's
// hand-over); what the tracker took for a burst is given back once the
// clients have gone and been announced offline.
func TestTrackerGivesBackWhatABurstOfConnectionsTookOnceTheyLeave(t *testing.T) {
	tr, st, _ := newTracker(t, Config{NoPush: true})
	const n = 50000
	flags := func() int { st.mu.Lock(); defer st.mu.Unlock(); return len(st.flags) }
	testkit.GivesBack(t, "a burst of 50,000 connections", 10, func() {
		for i := range n {
			tr.Connected(fmt.Sprint("client-", i), "", int64(i))
		}
		testkit.WaitFor(t, 10*time.Second, "the connections to be written", func() bool { return flags() == n })
	}, func() {
		for i := range n {
			tr.Disconnected(fmt.Sprint("client-", i), int64(i))
		}
		testkit.WaitFor(t, 10*time.Second, "the disconnects to be written and announced", func() bool {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			return flags() == 0 && len(tr.zeroAt) == 0 && len(tr.dirtyClients) == 0
		})
		// The fake store's own maps are not the tracker's.
		st.mu.Lock()
		st.flags, st.seen = map[string]string{}, map[int64]int{}
		st.mu.Unlock()
	})
}

// Presence events from other nodes that arrive faster than the tracker
// pushes them (its database is slow) are dropped past a bound, and counted
// as such: chat_presence_remote_dropped_total.
func TestRemotePresenceEventsDroppedPastTheBoundAreCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	remote, release, hub := stalledRemote(t, reg)
	for i := range remoteQueue + 5 {
		remote(int64(i+2), true)
	}
	if n, err := testutil.GatherAndCount(reg, "chat_presence_remote_dropped_total"); err != nil || n != 1 {
		t.Fatalf("chat_presence_remote_dropped_total not exported (%d series, %v)", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "chat_presence_remote_dropped_total" {
			if n := mf.GetMetric()[0].GetCounter().GetValue(); n != 5 {
				t.Fatalf("chat_presence_remote_dropped_total = %v, want 5", n)
			}
		}
	}
	release()
	waitEvents(t, hub, 1+remoteQueue)
}

// stalledRemote starts a tracker whose store holds its first read of
// watchers, and has it take a remote event of user 1 so that what remote
// hands over next waits in its queue until release.
func stalledRemote(t *testing.T, reg prometheus.Registerer) (remote func(user int64, online bool), release func(), hub *fakeHub) {
	t.Helper()
	tr, st, hub := newTracker(t, Config{Registerer: reg})
	release = holdWatchers(t, st)
	remote = func(user int64, online bool) {
		tr.Remote(chat.Event{Type: chat.EventPresence, UserID: user, Online: &online})
	}
	remote(1, true) // the tracker takes it and waits for its watchers
	testkit.WaitFor(t, 5*time.Second, "the first event taken", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.remote) == 0
	})
	return remote, release, hub
}

// holdWatchers has st's reads of watchers wait until release (a slow
// database), which the test's cleanup calls before the tracker's Close
// waits for it.
func holdWatchers(t *testing.T, st *fakeStore) (release func()) {
	t.Helper()
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	st.mu.Lock()
	st.hold = hold
	st.mu.Unlock()
	return release
}

// A visibility change is announced on this node and published for the
// others: hidden to the users the subject hides from (HiddenFrom), with
// neither online nor lastSeen; shown again as the subject's current state
// to their watchers. Another node's hidden event goes to HiddenFrom too.
func TestVisibilityChangesGoToWhomTheyConcernOnEveryNode(t *testing.T) {
	var mu sync.Mutex
	var published []chat.Event
	tr, _, hub := newTracker(t, Config{Publish: func(ev chat.Event) {
		mu.Lock()
		published = append(published, ev)
		mu.Unlock()
	}})
	tr.PresenceVisibilityChanged(1, true)
	evs := waitEvents(t, hub, 1)
	if ev := evs[0]; ev.UserID != 1 || !ev.Hidden || ev.Online == nil || *ev.Online || ev.LastSeen != nil || len(ev.To) != 1 || ev.To[0] != 200 {
		t.Fatalf("hidden event %+v, want hidden to the users 1 hides from", ev)
	}
	tr.PresenceVisibilityChanged(1, false)
	if ev := waitEvents(t, hub, 2)[1]; ev.UserID != 1 || ev.Hidden || ev.Online == nil || len(ev.To) != 1 || ev.To[0] != 100 {
		t.Fatalf("shown-again event %+v, want the state to 1's watchers", ev)
	}
	mu.Lock()
	n := len(published)
	mu.Unlock()
	if n != 2 || !published[0].Hidden || published[1].Hidden {
		t.Fatalf("published to the other nodes: %+v", published)
	}
	off := false
	tr.Remote(chat.Event{Type: chat.EventPresence, UserID: 9, Online: &off, Hidden: true})
	if ev := waitEvents(t, hub, 3)[2]; ev.UserID != 9 || !ev.Hidden || len(ev.To) != 1 || ev.To[0] != 200 {
		t.Fatalf("another node's hidden event %+v, want it to the users 9 hides from", ev)
	}
}
