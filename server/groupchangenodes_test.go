package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// Two changes of one group committed one after the other on two nodes, A
// on node a, then B on node b, while Kafka is down: node b delivers B
// to its clients at once and A only once Kafka is back. A group's
// conversation.updated carries every setting and a member.updated a
// member's role, which clients apply as they come: a client of either
// node must not get A's after B's (it would show the title and role B
// replaced), and gets every system entry, in seq order.
func TestGroupChangesCommittedOnTwoNodesNeverReachAClientOlderAfterNewer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	kafka, k, startLog := restartableKafka(t)
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "gchange-a"})
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "gchange-b"})
	const owner, onA, onB, promoted = 1, 2, 3, 4
	g := mustGroup(t, context.Background(), a, owner, "start", []int64{onA, onB, promoted})
	clients := map[string]*mqtttest.Client{
		"node a": rawClient(t, a.MQTTAddr(), onA, "gchange-a", 5, true),
		"node b": rawClient(t, b.MQTTAddr(), onB, "gchange-b", 5, true),
	}
	waitForConsumer(t, a, b, rawClient(t, b.MQTTAddr(), owner, "gchange-warm", 5, true))

	k.Close()
	change := func(node *server.Server, srv, title string, role chat.Role) {
		t.Helper()
		if r := httpDo(t, node, owner, "PATCH", fmt.Sprintf("/v1/conversations/%d", g.ID), map[string]string{"title": title}); r.status != 200 {
			t.Fatalf("rename to %s on node %s: %d %s", title, srv, r.status, r.body)
		}
		path := fmt.Sprintf("/v1/conversations/%d/members/%d/role", g.ID, promoted)
		if r := httpDo(t, node, owner, "PUT", path, map[string]string{"role": string(role)}); r.status != 200 {
			t.Fatalf("role %s on node %s: %d %s", role, srv, r.status, r.body)
		}
	}
	change(a, "a", "A", chat.RoleAdmin)
	change(b, "b", "B", chat.RoleMember)
	startLog()
	// A sentinel sent on each node: a node's own reaches its clients at
	// once, the other's through Kafka, behind every change its node
	// committed before it (one partition per conversation, in commit
	// order). Once a client has both, the other node's changes reached
	// its node, however long the relay took to find Kafka back.
	mustSendAs(t, a, g.ID, owner, "sentinel a")
	mustSendAs(t, b, g.ID, owner, "sentinel b")

	for name, c := range clients {
		var titles, roles []string
		var entries []int64
		sentinels := map[any]bool{}
		for _, ev := range eventsUntilQuiet(t, c, name, func(ev map[string]any) bool {
			if ev["body"] == "sentinel a" || ev["body"] == "sentinel b" {
				sentinels[ev["body"]] = true
			}
			return len(sentinels) == 2
		}) {
			switch ev["type"] {
			case chat.EventConversationUpdated:
				titles = append(titles, fmt.Sprint(ev["title"]))
			case chat.EventMemberUpdated:
				roles = append(roles, fmt.Sprint(ev["role"]))
			case chat.EventSystemNew:
				entries = append(entries, int64(ev["seq"].(float64)))
			}
		}
		t.Logf("%s: titles %v, roles %v, entries %v", name, titles, roles, entries)
		if len(titles) == 0 || titles[len(titles)-1] != "B" || slices.Index(titles, "A") > slices.Index(titles, "B") {
			t.Errorf("the client on %s got conversation.updated with titles %v, want A (if at all) before B, B last", name, titles)
		}
		if len(roles) == 0 || roles[len(roles)-1] != string(chat.RoleMember) || slices.Index(roles, "admin") > slices.Index(roles, "member") {
			t.Errorf("the client on %s got member.updated with roles %v, want admin (if at all) before member, member last", name, roles)
		}
		if !slices.Equal(entries, []int64{1, 2, 3, 4}) {
			t.Errorf("the client on %s got system entries %v, want 1 2 3 4", name, entries)
		}
	}
}
