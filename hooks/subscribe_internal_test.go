package hooks

import (
	"context"
	"net"
	"runtime"
	"slices"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

type savedSubs struct {
	chat.SessionStore
	got [][]chat.Subscription
}

func (s *savedSubs) SaveSubscriptions(_ context.Context, _, _ string, subs []chat.Subscription) error {
	s.got = append(s.got, slices.Clone(subs))
	return nil
}

type readyHub struct {
	chat.Delivery
	ready bool
}

func (h *readyHub) SetReady(_ string, _ chat.Conn, ready bool) { h.ready = ready }

// subscribe is mochi's processSubscribe for filters all granted, around
// the hook's OnSubscribe and OnSubscribed.
func subscribe(h *Chat, cl *mqtt.Client, filters ...string) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe}, PacketID: 1}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	pk = h.OnSubscribe(cl, pk)
	codes := make([]byte, len(pk.Filters))
	for i, sub := range pk.Filters {
		if !h.OnACLCheck(cl, sub.Filter, false) {
			codes[i] = packets.ErrNotAuthorized.Code
			continue
		}
		h.server.Topics.Subscribe(cl.ID, sub)
		cl.State.Subscriptions.Add(sub.Filter, sub)
		codes[i] = sub.Qos
	}
	h.OnSubscribed(cl, pk, codes)
}

func subscribeClient(t *testing.T) (*Chat, *mqtt.Client, *savedSubs, *readyHub) {
	t.Helper()
	store, hub := &savedSubs{}, &readyHub{}
	h := New(Config{Sessions: store, Hub: hub})
	srv := mqtt.New(nil)
	h.Attach(srv)
	ours, theirs := net.Pipe()
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	cl := srv.NewClient(ours, "tcp", "device-1", false)
	h.clients.Store(cl, &clientInfo{userID: 42, persistent: true, conn: &mqttConn{cl: cl, events: EventsTopic(42)}})
	return h, cl, store, hub
}

// A connection's first SUBSCRIBE (every connection makes one) records
// what it granted without a copy of mochi's list of the client's
// subscriptions: a map of ~750 bytes per connect, garbage in the size
// class of the one each connection keeps, which leaves that class's
// spans part empty and the idle connection's heap larger (issue 24).
func TestAFirstSubscribeIsRecordedWithoutCopyingTheClientsList(t *testing.T) {
	h, cl, store, hub := subscribeClient(t)
	subscribe(h, cl, "chat/v1/user/42/events", "chat/v1/user/42/events")
	if want := []chat.Subscription{{Filter: "chat/v1/user/42/events", QoS: grantedQoS}}; len(store.got) != 1 || !slices.Equal(store.got[0], want) {
		t.Fatalf("recorded %v, want [%v]", store.got, want)
	}
	if !hub.ready {
		t.Fatal("the events topic subscribed, the session is not ready")
	}
	// A second filter: the list is both.
	subscribe(h, cl, "chat/v1/user/42/rpc/+")
	got := store.got[len(store.got)-1]
	slices.SortFunc(got, func(a, b chat.Subscription) int { return compareStrings(a.Filter, b.Filter) })
	if want := []chat.Subscription{{Filter: "chat/v1/user/42/events", QoS: grantedQoS}, {Filter: "chat/v1/user/42/rpc/+", QoS: grantedQoS}}; !slices.Equal(got, want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}

	// What a first SUBSCRIBE allocates besides the recorded list: the
	// events topic the hook compares with.
	h2, cl2, _, _ := subscribeClient(t)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe}, PacketID: 1,
		Filters: []packets.Subscription{{Filter: "chat/v1/user/42/events", Qos: grantedQoS}}}
	cl2.State.Subscriptions.Add("chat/v1/user/42/events", pk.Filters[0])
	codes := []byte{grantedQoS}
	allocs := testing.AllocsPerRun(100, func() { h2.OnSubscribed(cl2, pk, codes) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 1000
	for range n {
		h2.OnSubscribed(cl2, pk, codes)
	}
	runtime.ReadMemStats(&after)
	bytes := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("a first SUBSCRIBE's OnSubscribed: %.0f allocations, %d bytes", allocs, bytes)
	// Less the recorded list's copy the test's store makes.
	if allocs > 9 || bytes > 600 {
		t.Fatalf("a first SUBSCRIBE's OnSubscribed: %.0f allocations, %d bytes; want at most 9 and 600 (a copy of mochi's list is 2 more and ~750 bytes)", allocs, bytes)
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
