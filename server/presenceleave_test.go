package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// hiddenSeen waits for c's next presence event about user and checks it
// says only that c may no longer see user's presence.
func hiddenSeen(t *testing.T, c *mqtttest.Client, user int64, what string) {
	t.Helper()
	ev := nextPresenceSeen(t, c, user, 5*time.Second)
	if !ev.Hidden || ev.Online == nil || *ev.Online || ev.LastSeen != nil {
		t.Fatalf("%s: %+v about user %d, want online false, hidden, no lastSeen", what, ev, user)
	}
}

// TestLeavingTheLastSharedSmallGroupHidesPresenceBothWays: users 1 and 2
// share one small group, and each watches the other. When 1 leaves it,
// neither may see the other's presence any more, so each is told so at
// once (else each would show the other online for good: later changes
// are no longer announced to them). User 3, who still shares another
// group with 1, is told nothing; nor is 1 about 3.
func TestLeavingTheLastSharedSmallGroupHidesPresenceBothWays(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_PRESENCE_PUSH": "true"})
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 2, "g", []int64{1, 3})
	mustGroup(t, ctx, srv, 1, "also", []int64{3})
	two := rawClient(t, srv.MQTTAddr(), 2, "dev-2", 5, true)
	three := rawClient(t, srv.MQTTAddr(), 3, "dev-3", 5, true)
	// Both announced online (2 in the same round as 3 or before) before
	// user 1 connects, so that user 1 hears of neither.
	nextPresence(t, two, 3, 5*time.Second)
	one := rawClient(t, srv.MQTTAddr(), 1, "dev-1", 5, true)
	for _, c := range []*mqtttest.Client{two, three} {
		if ev := nextPresence(t, c, 1, 5*time.Second); !*ev.Online {
			t.Fatalf("user 1 connected: %+v", ev)
		}
	}
	if code := api(t, srv, 1, "DELETE", fmt.Sprintf("/v1/conversations/%d/members/1", g.ID), nil, nil); code != 204 {
		t.Fatalf("user 1 leaves: %d", code)
	}
	hiddenSeen(t, two, 1, "user 2, after user 1 left their one shared group")
	hiddenSeen(t, one, 2, "user 1, after leaving their one group with user 2")
	// The lists the member.removed carries are for the nodes.
	pk := nextPublish(t, three, "member.removed", 5*time.Second, func(pk packets.Packet) bool {
		return bytes.Contains(pk.Payload, []byte(`"type":"member.removed"`))
	})
	if bytes.Contains(pk.Payload, []byte("presenceHidden")) {
		t.Fatalf("a client got the removal's presence lists: %s", pk.Payload)
	}
	noPresence(t, three, 1, 300*time.Millisecond)
	noPresence(t, one, 3, 100*time.Millisecond)
}

// TestARemovalOnOneNodeHidesPresenceFromAWatcherOnAnother: user 2, on
// node b, watches user 1 through their one small group; user 1 is
// removed from it on node a. The member.removed that reaches node b tells
// user 2 there, and user 1 on node a hears the same of user 2.
func TestARemovalOnOneNodeHidesPresenceFromAWatcherOnAnother(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two nodes and Kafka")
	}
	var g chat.Conversation
	a, _, friend, dev := presencePairIn(t, "pl", func(a *server.Server) chat.Conversation {
		g = mustGroup(t, context.Background(), a, 2, "g", []int64{1})
		return g
	})
	if code := api(t, a, 2, "DELETE", fmt.Sprintf("/v1/conversations/%d/members/1", g.ID), nil, nil); code != 204 {
		t.Fatalf("user 2 removes user 1: %d", code)
	}
	hiddenSeen(t, friend, 1, "user 2 on node b, after user 1 was removed on node a")
	hiddenSeen(t, dev, 2, "user 1 on node a, removed from their one group with user 2")
}
