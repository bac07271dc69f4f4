package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// eventsUntil reads c's events until one of type stop arrives and returns
// every event before it, decoded loosely.
func eventsUntil(t *testing.T, c *mqtttest.Client, stop string, timeout time.Duration) []map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	var out []map[string]any
	for {
		select {
		case pk, ok := <-c.Publishes:
			if !ok {
				t.Fatalf("connection closed while waiting for %s: %v", stop, c.Err)
			}
			var ev map[string]any
			if err := json.Unmarshal(pk.Payload, &ev); err != nil {
				t.Fatalf("bad event %q: %v", pk.Payload, err)
			}
			if ev["type"] == stop {
				return append(out, ev)
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("no %s within %v (got %v)", stop, timeout, out)
		}
	}
}

func readsOf(evs []map[string]any) (users []int64) {
	for _, ev := range evs {
		if ev["type"] == chat.EventReadUpdated {
			users = append(users, int64(ev["userId"].(float64)))
		}
	}
	return users
}

func markReadMQTT(t *testing.T, c *mqtttest.Client, conv, seq int64) {
	t.Helper()
	ack, err := c.Publish(testnode.ReadTopic(conv), 1, []byte(fmt.Sprintf(`{"seq":%d}`, seq)))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("read receipt: %v 0x%02x", err, ack.ReasonCode)
	}
}

// Read receipts off, over MQTT on two nodes: the reader's read.updated
// reaches the reader's own devices only, and the reader gets nobody's.
// Node b learns of the events through Kafka, so the rule travels with the
// event.
func TestReadReceiptsOffReachNoOtherMemberOnAnyNode(t *testing.T) {
	t.Parallel()
	a, b := startKafkaPair(t, "r", nil)
	ctx := context.Background()
	const alice, bob, carol = 1, 2, 3
	g := mustGroup(t, ctx, a, alice, "g", []int64{bob, carol})
	if _, err := a.Service.SetSettings(ctx, bob, chat.SettingsUpdate{ReadReceipts: new(bool)}); err != nil {
		t.Fatal(err)
	}
	aliceA := rawClient(t, a.MQTTAddr(), alice, "alice-a", 5, true)
	aliceB := rawClient(t, b.MQTTAddr(), alice, "alice-b", 5, true)
	bobA := rawClient(t, a.MQTTAddr(), bob, "bob-a", 5, true)
	bobB := rawClient(t, b.MQTTAddr(), bob, "bob-b", 5, true)
	carolA := rawClient(t, a.MQTTAddr(), carol, "carol-a", 5, true)
	for _, id := range []string{"alice-a", "bob-a", "carol-a"} {
		sessionLoaded(t, a, id)
	}
	for _, id := range []string{"alice-b", "bob-b"} {
		sessionLoaded(t, b, id)
	}
	waitForConsumer(t, a, b, aliceB)

	sendN(t, aliceA, g.ID, 1, "read me")
	markReadMQTT(t, bobA, g.ID, 1)
	markReadMQTT(t, carolA, g.ID, 1)
	// carol's read is the sentinel: bob's came first, so it would be
	// before it.
	for name, c := range map[string]*mqtttest.Client{"alice on a": aliceA, "alice on b": aliceB} {
		evs := eventsUntil(t, c, chat.EventReadUpdated, 10*time.Second)
		if r := readsOf(evs); len(r) != 1 || r[0] != carol {
			t.Fatalf("%s got read.updated of %v, want only carol's", name, r)
		}
		for _, ev := range evs {
			if _, ok := ev["except"]; ok {
				t.Fatalf("%s got the members' settings: %v", name, ev)
			}
		}
	}
	// bob's other device learns of bob's own read; neither learns carol's.
	evs := eventsUntil(t, bobB, chat.EventReadUpdated, 10*time.Second)
	if r := readsOf(evs); len(r) != 1 || r[0] != bob {
		t.Fatalf("bob's other device got read.updated of %v, want bob's own", r)
	}
	sendN(t, aliceA, g.ID, 1, "sentinel")
	for name, c := range map[string]*mqtttest.Client{"bob on a": bobA, "bob on b": bobB} {
		evs := eventsUntil(t, c, chat.EventMessageNew, 10*time.Second)
		for len(evs) > 0 && evs[len(evs)-1]["body"] != "sentinel 0" {
			evs = append(evs, eventsUntil(t, c, chat.EventMessageNew, 10*time.Second)...)
		}
		for _, u := range readsOf(evs) {
			if u != bob {
				t.Fatalf("%s got read.updated of %d: reciprocity", name, u)
			}
		}
	}
}

// waitForConsumer makes sure node b consumes Kafka before the test relies
// on it: a message sent on a arrives at c on b.
func waitForConsumer(t *testing.T, a, b *server.Server, c *mqtttest.Client) {
	t.Helper()
	conv := mustDirect(t, context.Background(), a, 1, 999)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mustSendAs(t, a, conv.ID, 999, "warm-up")
		select {
		case pk := <-c.Publishes:
			var ev event
			if json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventMessageNew && ev.ConversationID == conv.ID {
				// Drain what else the warm-up sent.
				time.Sleep(200 * time.Millisecond)
				for len(c.Publishes) > 0 {
					<-c.Publishes
				}
				return
			}
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Fatal("node b never delivered what node a committed")
}

// A member who was offline while the group was renamed and members were
// added catches up on those changes as system entries, in seq order; online
// members get conversation.updated and system.new live.
func TestGroupChangesReachAnOfflineMemberAsSystemEntriesOnReconnect(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	const owner, away = 1, 2
	g := mustGroup(t, ctx, srv, owner, "before", []int64{away})
	phone := rawClient(t, srv.MQTTAddr(), away, "away-phone", 5, false)
	sessionLoaded(t, srv, "away-phone")
	phone.Disconnect()
	testkit.WaitFor(t, 10*time.Second, "the session to stop", func() bool { return srv.Hub.Session("away-phone") == nil })

	live := rawClient(t, srv.MQTTAddr(), owner, "owner-live", 5, true)
	sessionLoaded(t, srv, "owner-live")
	title := "after"
	if _, err := srv.Service.UpdateGroup(ctx, g.ID, owner, chat.GroupUpdate{Title: &title}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Service.AddMemberAs(ctx, g.ID, owner, 3, chat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	var sys []map[string]any
	var updated map[string]any
	for len(sys) < 2 || updated == nil {
		for _, ev := range eventsUntil(t, live, chat.EventSystemNew, 10*time.Second) {
			switch ev["type"] {
			case chat.EventSystemNew:
				sys = append(sys, ev)
			case chat.EventConversationUpdated:
				updated = ev
			}
		}
	}
	if sys[0]["action"] != "group.updated" || sys[1]["action"] != "member.added" || updated["title"] != "after" {
		t.Fatalf("live system entries %v, conversation.updated %v", sys, updated)
	}

	back := rawClient(t, srv.MQTTAddr(), away, "away-phone", 5, false)
	var got []map[string]any
	for len(got) < 2 {
		for _, ev := range eventsUntil(t, back, chat.EventSystemNew, 15*time.Second) {
			if ev["type"] == chat.EventSystemNew {
				got = append(got, ev)
			}
		}
	}
	if got[0]["seq"] != float64(1) || got[0]["action"] != "group.updated" || got[0]["title"] != "after" || got[0]["actorId"] != float64(owner) ||
		got[1]["seq"] != float64(2) || got[1]["action"] != "member.added" || got[1]["userId"] != float64(3) || got[1]["role"] != "admin" {
		t.Fatalf("replayed system entries %v", got)
	}
}

// A blocked user's MQTT send into the blocker's direct conversation is
// refused with PUBACK 0x87 and stored nowhere.
func TestABlockedUsersMQTTSendIsRefusedWith0x87(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	d := mustDirect(t, ctx, srv, 1, 2)
	if err := srv.Service.Block(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	c := rawClient(t, srv.MQTTAddr(), 2, "blocked-2", 5, true)
	ack, err := c.Publish(testnode.MsgTopic(d.ID), 1, testnode.SendPayload(newID(), "let me in"))
	if err != nil || ack.ReasonCode != 0x87 {
		t.Fatalf("blocked send: %v 0x%02x", err, ack.ReasonCode)
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM message WHERE conversation_id = $1`, d.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d messages stored, %v", n, err)
	}
	if blocked, err := srv.Service.IsBlocked(ctx, 1, 2); err != nil || !blocked {
		t.Fatalf("IsBlocked(1 blocked 2) = %v, %v", blocked, err)
	}
}

// profile.updated reaches the users who share a conversation with the
// user, on every node (node b reads the audience itself), and nobody else.
func TestProfileUpdatesReachWhoSharesAConversationOnEveryNode(t *testing.T) {
	t.Parallel()
	a, b := startKafkaPair(t, "p", nil)
	ctx := context.Background()
	if _, _, err := a.Service.OpenDirect(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	friend := rawClient(t, b.MQTTAddr(), 1, "friend-b", 5, true)
	stranger := rawClient(t, b.MQTTAddr(), 3, "stranger-b", 5, true)
	sessionLoaded(t, b, "friend-b")
	sessionLoaded(t, b, "stranger-b")
	waitForConsumer(t, a, b, friend)
	r := httpDo(t, a, 2, "PUT", "/v1/me", map[string]string{"displayName": "Bo"})
	if r.status != 200 {
		t.Fatalf("PUT /v1/me: %d %s", r.status, r.body)
	}
	evs := eventsUntil(t, friend, chat.EventProfileUpdated, 15*time.Second)
	if ev := evs[len(evs)-1]; ev["userId"] != float64(2) || ev["displayName"] != "Bo" {
		t.Fatalf("profile.updated %v", ev)
	}
	// The stranger shares nothing: their next event is the sentinel.
	d3 := mustDirect(t, ctx, a, 3, 4)
	if _, err := a.Service.Send(ctx, chat.SendRequest{ConversationID: d3.ID, SenderID: 4, ClientMsgID: newID(), Body: "sentinel"}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range eventsUntil(t, stranger, chat.EventMessageNew, 15*time.Second) {
		if ev["type"] == chat.EventProfileUpdated {
			t.Fatalf("a stranger got %v", ev)
		}
	}
}

// The Kafka consumer hands the other nodes' events over one at a time: a
// profile.updated, whose audience this node reads from PostgreSQL, must not
// hold up the events behind it while that read waits for the database.
func TestARemoteProfileUpdateWaitingForPostgreSQLHoldsUpNoOtherNodesEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, kafkaAddr := pgtest.NewDB(t), startKafka(t)
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafkaAddr, "CHAT_NODE_ID": "slowdb-b"})
	conv := mustDirect(t, ctx, b, 1, 2)
	friend := rawClient(t, b.MQTTAddr(), 1, "friend-b", 5, true)
	sessionLoaded(t, b, "friend-b")

	// Events as another node's relay writes them.
	w := &kafka.Writer{Addr: kafka.TCP(kafkaAddr), Topic: "chat.events", Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond}
	defer w.Close()
	fromElsewhere := func(key, value string) {
		t.Helper()
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: []byte(value),
			Headers: []kafka.Header{{Key: "origin", Value: []byte("chatd:elsewhere")}}}); err != nil {
			t.Fatal(err)
		}
	}
	typing := fmt.Sprintf(`{"type":"typing","conversationId":%d,"userId":2}`, conv.ID)
	// Until one arrives: the consumer has joined, and the fan-out knows
	// the conversation's members.
	testkit.WaitFor(t, 30*time.Second, "a typing event from another node", func() bool {
		fromElsewhere(fmt.Sprint(conv.ID), typing)
		for {
			select {
			case pk := <-friend.Publishes:
				var ev event
				if json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventTyping {
					return true
				}
			case <-time.After(500 * time.Millisecond):
				return false
			}
		}
	})

	// The audience read waits while the member table is locked.
	release := pgtest.LockTable(t, url, "conversation_member IN ACCESS EXCLUSIVE MODE")
	fromElsewhere("0", `{"type":"profile.updated","userId":2,"displayName":"Bo","about":"","avatar":""}`)
	fromElsewhere(fmt.Sprint(conv.ID), typing)
	nextEvent(t, friend, chat.EventTyping, 3*time.Second) // the read gives up after 5 s
	release()
	evs := eventsUntil(t, friend, chat.EventProfileUpdated, 10*time.Second)
	if ev := evs[len(evs)-1]; ev["userId"] != float64(2) || ev["displayName"] != "Bo" {
		t.Fatalf("profile.updated %v", ev)
	}
}
