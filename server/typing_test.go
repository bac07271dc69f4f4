package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
)

// typingUntil reads c's events until the typing event of conversation
// stop and fails on any other typing event before it.
func typingUntil(t *testing.T, c *mqtttest.Client, stop int64, timeout time.Duration) event {
	t.Helper()
	var ev event
	nextPublish(t, c, fmt.Sprintf("the typing event of conversation %d", stop), timeout, func(pk packets.Packet) bool {
		ev = event{}
		if json.Unmarshal(pk.Payload, &ev) != nil || ev.Type != chat.EventTyping {
			return false
		}
		if ev.ConversationID != stop {
			t.Fatalf("typing event before that of conversation %d: %s", stop, pk.Payload)
		}
		return true
	})
	return ev
}

// Behind a load balancer the members of a conversation are connected to
// different nodes: a member typing on node A is seen by a member on node B
// (through Kafka, not stored), once per second as on one node, and by
// nobody else there: not by a user of node B outside the conversation,
// nor by one who blocked the typist in their direct conversation.
func TestTypingOnOneNodeReachesTheMembersOnAnotherAndNobodyElse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes and Kafka")
	}
	ctx := context.Background()
	a, b := startKafkaPair(t, "ty", nil)
	conv := mustGroup(t, ctx, a, 1, "typing", []int64{2})
	both := mustGroup(t, ctx, a, 1, "sentinel", []int64{2, 3})
	direct := mustDirect(t, ctx, a, 1, 3)
	if code := api(t, b, 3, "PUT", fmt.Sprintf("/v1/me/blocks/%d", 1), nil, nil); code != 200 && code != 204 {
		t.Fatalf("block: %d", code)
	}
	typist := rawClient(t, a.MQTTAddr(), 1, "ty-1", 5, true)
	member := rawClient(t, b.MQTTAddr(), 2, "ty-2", 5, true)
	outsider := rawClient(t, b.MQTTAddr(), 3, "ty-3", 5, true)
	typing := func(conv int64) {
		t.Helper()
		if _, err := typist.Publish(fmt.Sprintf("chat/v1/conv/%d/typing", conv), 0, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}

	// Node B's consumer reads from where the topic ended when it started,
	// so nothing needs to wait for it to join its group.
	for range 5 {
		typing(conv.ID)
	}
	if ev := typingUntil(t, member, conv.ID, 30*time.Second); ev.UserID != 1 {
		t.Fatalf("typing on B = %+v", ev)
	}
	typing(direct.ID) // refused on A: 3 blocked 1
	typing(both.ID)
	// Routed after the first: anything of conv or of the direct
	// conversation would have reached them before it.
	if ev := typingUntil(t, member, both.ID, 15*time.Second); ev.UserID != 1 {
		t.Fatalf("typing on B = %+v", ev)
	}
	if ev := typingUntil(t, outsider, both.ID, 15*time.Second); ev.UserID != 1 {
		t.Fatalf("typing on B = %+v", ev)
	}
	var stored int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'typing'`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d typing events stored in the outbox (%v)", stored, err)
	}
}
