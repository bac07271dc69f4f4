package delivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
)

// countedMembers counts the reads of a conversation's members.
type countedMembers struct {
	chat.DeliveryStore
	conv int64
	n    atomic.Int64
}

func (s *countedMembers) Members(ctx context.Context, conv int64) (chat.Routing, error) {
	if conv == s.conv {
		s.n.Add(1)
	}
	return s.DeliveryStore.Members(ctx, conv)
}

// TestAConversationSettledWhileTheHubQueueIsFullIsSettledOnceThereIsRoom:
// the store ends an Unsettled of a group while the hub's queue is full
// (the fan-out stalled): once the fan-out drains it, the group's events
// are routed by the members it knows again, not each after a read of its
// own. Before, the Settled was dropped with the queue full, and the
// group's members were read for every event of it until the node
// restarted.
func TestAConversationSettledWhileTheHubQueueIsFullIsSettledOnceThereIsRoom(t *testing.T) {
	f := setup(t)
	st := &countedMembers{DeliveryStore: f.sessions, conv: f.conv.ID}
	m := delivery.NewMetrics(nil)
	h := startHub(t, st, delivery.Options{HubQueue: 4, Metrics: m})
	u2 := attach(t, h, f, "u2", false, true)
	first := sendAs(t, f, f.conv.ID, 1)
	h.Publish(first)
	waitEntry(t, u2, f.conv.ID, first.Seq)

	h.Unsettled(f.conv.ID)
	if g := testutil.ToFloat64(m.Unsettled); g != 1 {
		t.Errorf("chat_delivery_unsettled_conversations = %v, want 1", g)
	}
	release := h.HoldFanout()
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	h.Publish(sendAs(t, f, f.conv.ID, 1)) // read again, then routing it stalls the fan-out
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(m.Overflows) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hub's queue never filled")
		}
		h.Publish(chat.Event{Type: chat.EventTyping, ConversationID: 0}) // routed to nobody
		time.Sleep(time.Millisecond)
	}
	h.Settled(f.conv.ID)
	release()
	held = false

	// Within 10 s an event of the group is routed without a read of its
	// members (the first after the overflow reads them: the index was
	// emptied).
	for deadline := time.Now().Add(10 * time.Second); ; {
		before := st.n.Load()
		ev := sendAs(t, f, f.conv.ID, 1)
		h.Publish(ev)
		waitEntry(t, u2, f.conv.ID, ev.Seq)
		if st.n.Load() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's members are still read for each of its events 10 s after Settled (%d reads)", st.n.Load())
		}
	}
	if g := testutil.ToFloat64(m.Unsettled); g != 0 {
		t.Errorf("chat_delivery_unsettled_conversations = %v once settled, want 0", g)
	}
}
