package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

type presenceEvent struct {
	Type     string     `json:"type"`
	UserID   int64      `json:"userId"`
	Online   *bool      `json:"online"`
	LastSeen *time.Time `json:"lastSeen"`
}

// nextPresence waits for a presence event about user on c.
func nextPresence(t *testing.T, c *mqtttest.Client, user int64, timeout time.Duration) presenceEvent {
	t.Helper()
	var ev presenceEvent
	pk := nextPublish(t, c, fmt.Sprintf("presence event about user %d", user), timeout, func(pk packets.Packet) bool {
		ev = presenceEvent{}
		return json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventPresence && ev.UserID == user
	})
	if ev.Online == nil || ev.LastSeen == nil {
		t.Fatalf("presence event without online or lastSeen: %s", pk.Payload)
	}
	return ev
}

// noPresence fails if a presence event about user arrives on c within d.
func noPresence(t *testing.T, c *mqtttest.Client, user int64, d time.Duration) {
	t.Helper()
	noPublish(t, c, d, "unexpected presence event", func(payload []byte) bool {
		var ev presenceEvent
		return json.Unmarshal(payload, &ev) == nil && ev.Type == chat.EventPresence && ev.UserID == user
	})
}

type presenceReply struct {
	UserID   int64      `json:"userId"`
	Online   bool       `json:"online"`
	LastSeen *time.Time `json:"lastSeen"`
}

func queryPresence(t *testing.T, srv *server.Server, caller, user int64) (int, presenceReply) {
	t.Helper()
	r := httpDo(t, srv, caller, "GET", fmt.Sprintf("/v1/users/%d/presence", user), nil)
	var p presenceReply
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("presence body %s", r.body)
		}
	}
	return r.status, p
}

// offlineAnnounced waits for friend's next presence event of user 1 and
// checks it says offline, and that user 2's query of user 1 on srv agrees
// with a last-seen time. since is when what happened.
func offlineAnnounced(t *testing.T, friend *mqtttest.Client, srv *server.Server, since time.Time, timeout time.Duration, what string) {
	t.Helper()
	if ev := nextPresence(t, friend, 1, timeout); *ev.Online {
		t.Fatalf("%s: %+v, want offline", what, ev)
	}
	t.Logf("offline announced %v after %s", time.Since(since).Round(10*time.Millisecond), what)
	if code, p := queryPresence(t, srv, 2, 1); code != 200 || p.Online || p.LastSeen == nil {
		t.Fatalf("query after %s: %d %+v", what, code, p)
	}
}

// TestPresenceFollowsASilentDeviceAndStaysWithinSharedConversations: a
// device that stops talking without DISCONNECT (a dead phone: keepalive 2s,
// no PINGREQ) is announced offline once the server gave up on it (1.5 ×
// keepalive) and the grace passed; presence reaches only users who share a
// small conversation with the user; large groups can only query.
func TestPresenceFollowsASilentDeviceAndStaysWithinSharedConversations(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_PRESENCE_PUSH": "true", "CHAT_LARGE_GROUP": "3"})
	ctx := context.Background()
	if _, _, err := srv.Service.OpenDirect(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Service.CreateGroup(ctx, 2, "without 1", []int64{3}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Service.CreateGroup(ctx, 4, "large", []int64{1, 5, 6}); err != nil {
		t.Fatal(err)
	}
	friend := rawClient(t, srv.MQTTAddr(), 2, "friend-2", 5, true)
	stranger := rawClient(t, srv.MQTTAddr(), 3, "stranger-3", 4, true)
	crowd := rawClient(t, srv.MQTTAddr(), 4, "crowd-4", 5, true)

	if code, p := queryPresence(t, srv, 2, 1); code != 200 || p.Online || p.LastSeen != nil {
		t.Fatalf("never-seen user: %d %+v", code, p)
	}
	dev, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "dying-1", Password: testnode.Token(t, 1), Clean: true, Keepalive: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Drop)
	lastPacket := time.Now()
	if ev := nextPresence(t, friend, 1, 5*time.Second); !*ev.Online {
		t.Fatalf("first presence event says offline: %+v", ev)
	}
	if code, p := queryPresence(t, srv, 2, 1); code != 200 || !p.Online || p.LastSeen == nil {
		t.Fatalf("presence of a connected user: %d %+v", code, p)
	}

	// The device now says nothing at all and never closes its socket.
	ev := nextPresence(t, friend, 1, 15*time.Second)
	after := time.Since(lastPacket)
	t.Logf("silent device (keepalive 2s) announced offline %v after its last packet", after.Round(10*time.Millisecond))
	if *ev.Online || ev.LastSeen == nil {
		t.Fatalf("second presence event: %+v, want offline with lastSeen", ev)
	}
	if after < 2900*time.Millisecond {
		t.Fatalf("announced offline after %v, before the 3s keepalive deadline", after)
	}
	if d := ev.LastSeen.Sub(lastPacket); d < 2*time.Second || d > 8*time.Second {
		t.Fatalf("lastSeen %v is %v after the last packet", ev.LastSeen, d)
	}
	code, p := queryPresence(t, srv, 2, 1)
	if code != 200 || p.Online || p.LastSeen == nil || p.LastSeen.Sub(*ev.LastSeen).Abs() > 2*time.Second {
		t.Fatalf("presence after the device died: %d %+v (event said %v)", code, p, ev.LastSeen)
	}
	// Over MQTT RPC too.
	if _, err := friend.Publish("chat/v1/rpc/presence", 1, []byte(`{"userId":1}`), mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/2/rpc"}); err != nil {
		t.Fatal(err)
	}
	for reply := range friend.Publishes {
		if reply.TopicName == "chat/v1/user/2/rpc" {
			var m map[string]any
			_ = json.Unmarshal(reply.Payload, &m)
			if m["status"] != 200.0 || m["online"] != false || m["userId"] != 1.0 || m["lastSeen"] == nil {
				t.Fatalf("RPC presence: %s", reply.Payload)
			}
			break
		}
	}
	// Queries: a stranger gets 404, a member of a shared large group may ask.
	if code, _ := queryPresence(t, srv, 3, 1); code != 404 {
		t.Fatalf("stranger asked presence of user 1: %d, want 404", code)
	}
	if code, _ := queryPresence(t, srv, 4, 1); code != 200 {
		t.Fatalf("large-group member asked presence: %d, want 200", code)
	}
	if code, _ := queryPresence(t, srv, 1, 1); code != 200 {
		t.Fatalf("own presence: %d", code)
	}
	// No leak: neither the stranger nor the large group heard of user 1.
	noPresence(t, stranger, 1, 200*time.Millisecond)
	noPresence(t, crowd, 1, 200*time.Millisecond)
}

// watchedPhone is a node pushing presence with the given grace, where
// user 2 (friend) watches user 1 in their direct conversation and user 1's
// persistent phone has just been announced online to friend.
func watchedPhone(t *testing.T, grace time.Duration) (srv *server.Server, friend, phone *mqtttest.Client) {
	t.Helper()
	srv = startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_PRESENCE_PUSH": "true", "CHAT_PRESENCE_GRACE": grace.String()})
	if _, _, err := srv.Service.OpenDirect(context.Background(), 1, 2); err != nil {
		t.Fatal(err)
	}
	friend = rawClient(t, srv.MQTTAddr(), 2, "friend-2", 4, true)
	phone = rawClient(t, srv.MQTTAddr(), 1, "phone-1", 5, false)
	if ev := nextPresence(t, friend, 1, 5*time.Second); !*ev.Online {
		t.Fatalf("phone connected: %+v", ev)
	}
	return srv, friend, phone
}

// TestPresenceWithTwoDevices: a user is online while any device is; the
// first device dropping (TCP closed, no DISCONNECT) changes nothing, the
// second one makes them offline.
func TestPresenceWithTwoDevices(t *testing.T) {
	t.Parallel()
	// A grace of 3 s leaves a loaded machine room for the quick reconnect
	// at the end.
	srv, friend, phone := watchedPhone(t, 3*time.Second)
	laptop := rawClient(t, srv.MQTTAddr(), 1, "laptop-1", 4, true)
	noPresence(t, friend, 1, 500*time.Millisecond) // already online

	phone.Drop()
	noPresence(t, friend, 1, 3500*time.Millisecond) // the laptop is still there, past the grace
	if code, p := queryPresence(t, srv, 2, 1); code != 200 || !p.Online {
		t.Fatalf("one device left: %d %+v", code, p)
	}
	testkit.WaitFor(t, 5*time.Second, "phone's session released", func() bool { return srv.Hub.Session("phone-1") == nil })

	laptop.Drop()
	start := time.Now()
	offlineAnnounced(t, friend, srv, start, 10*time.Second, "the last device dropped")
	// A quick reconnect within the grace is not announced at all.
	back := rawClient(t, srv.MQTTAddr(), 1, "phone-1", 5, false)
	if ev := nextPresence(t, friend, 1, 5*time.Second); !*ev.Online {
		t.Fatalf("reconnected: %+v", ev)
	}
	back.Drop()
	dropped := time.Now()
	rawClient(t, srv.MQTTAddr(), 1, "phone-1", 5, false)
	if took := time.Since(dropped); took > 2*time.Second {
		// On a loaded machine the reconnect itself outlasted (most of) the
		// grace: what this run could show is not a quick reconnect.
		t.Skipf("the reconnect took %v, not within the presence grace", took)
	}
	noPresence(t, friend, 1, 3500*time.Millisecond)
}

// TestPresenceGraceIsASetting: with CHAT_PRESENCE_GRACE a phone that
// drops and comes back within it (a network switch on a weak network) is
// never announced offline, and one that stays away is announced once the
// grace is over, not at the default second.
func TestPresenceGraceIsASetting(t *testing.T) {
	t.Parallel()
	const grace = 4 * time.Second
	srv, friend, phone := watchedPhone(t, grace)
	phone.Drop()
	dropped := time.Now()
	noPresence(t, friend, 1, 2500*time.Millisecond) // past the default grace
	phone = rawClient(t, srv.MQTTAddr(), 1, "phone-1", 5, false)
	if time.Since(dropped) >= grace {
		t.Skipf("the reconnect came %v after the drop, not within the grace", time.Since(dropped))
	}
	noPresence(t, friend, 1, grace)

	phone.Drop()
	dropped = time.Now()
	if ev := nextPresence(t, friend, 1, grace+10*time.Second); *ev.Online {
		t.Fatalf("phone gone: %+v", ev)
	}
	if took := time.Since(dropped); took < grace-200*time.Millisecond {
		t.Fatalf("offline announced %v after the drop, before the grace of %v", took, grace)
	}
}

// TestPresenceAcrossNodes: presence pushes cross nodes through Kafka
// (published directly, never stored), and the query is right on every node.
func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two nodes and Kafka")
	}
	a, b, friend, dev := presencePair(t, "p")
	for _, n := range []*server.Server{a, b} {
		if code, p := queryPresence(t, n, 2, 1); code != 200 || !p.Online {
			t.Fatalf("query on %s: %d %+v", n.Settings.NodeID, code, p)
		}
	}
	dev.Disconnect()
	if ev := nextPresence(t, friend, 1, 15*time.Second); *ev.Online {
		t.Fatalf("offline across nodes: %+v", ev)
	}
	if code, p := queryPresence(t, b, 2, 1); code != 200 || p.Online {
		t.Fatalf("query on B after the disconnect on A: %d %+v", code, p)
	}
	// Hiding one's presence on A reaches the watcher on B too.
	rawClient(t, a.MQTTAddr(), 1, "dev-1", 5, true)
	if ev := nextPresence(t, friend, 1, 15*time.Second); !*ev.Online {
		t.Fatalf("back online across nodes: %+v", ev)
	}
	if code := api(t, a, 1, "PUT", "/v1/me/settings", map[string]any{"presence": false}, nil); code != 200 {
		t.Fatalf("presence off: %d", code)
	}
	if ev := nextPresenceSeen(t, friend, 1, 15*time.Second); !ev.Hidden || ev.Online == nil || *ev.Online || ev.LastSeen != nil {
		t.Fatalf("presence hidden on A, seen on B: %+v", ev)
	}
	if stored := pgtest.QueryOne[int](t, a.Pool, `SELECT count(*) FROM outbox WHERE type = 'presence'`); stored != 0 {
		t.Fatalf("%d presence events stored in the outbox", stored)
	}
}

// presencePair is two nodes sharing Kafka, with presence pushes: user
// 2 (friend) on node b watches user 1, whose device dev connected to node
// a has just been announced online to friend.
func presencePair(t *testing.T, prefix string) (a, b *server.Server, friend, dev *mqtttest.Client) {
	t.Helper()
	return presencePairIn(t, prefix, func(a *server.Server) chat.Conversation { return mustDirect(t, context.Background(), a, 1, 2) })
}

// presencePairIn is presencePair with users 1 and 2 sharing the
// conversation share makes on node a. Made once friend is connected to a
// node b that consumes, the share starts their sharing of presence there
// for sure, so friend gets user 1's state first, as the query answers
// it: offline, and no lastSeen for a user never seen. Waited for here, it
// cannot arrive later in place of the change a test waits for.
func presencePairIn(t *testing.T, prefix string, share func(a *server.Server) chat.Conversation) (a, b *server.Server, friend, dev *mqtttest.Client) {
	t.Helper()
	a, b, friend = kafkaPairConsuming(t, prefix, map[string]string{"CHAT_PRESENCE_PUSH": "true"}, share)
	if ev := nextPresenceSeen(t, friend, 1, 15*time.Second); ev.Online == nil || *ev.Online || ev.Hidden || ev.LastSeen != nil {
		t.Fatalf("user 1's state when the sharing started: %+v, want offline, never seen", ev)
	}
	dev = rawClient(t, a.MQTTAddr(), 1, "dev-1", 5, true)
	if ev := nextPresence(t, friend, 1, 15*time.Second); !*ev.Online {
		t.Fatalf("presence across nodes: %+v", ev)
	}
	return a, b, friend, dev
}

// warmUpUser sends the messages that tell when node b consumes; no test
// with kafkaPairConsuming asks about their presence.
const warmUpUser = 1000

// kafkaPairConsuming is two nodes sharing Kafka, with env on both, user
// 2 (friend) connected to node b, and the conversation share makes on
// node a made once node b consumes what node a commits: each event the
// share commits reaches node b while friend is connected there, so what
// it owes friend (the presence state of those it starts sharing a
// conversation with) comes for sure, rather than sometimes and late.
func kafkaPairConsuming(t *testing.T, prefix string, env map[string]string, share func(a *server.Server) chat.Conversation) (a, b *server.Server, friend *mqtttest.Client) {
	t.Helper()
	a, b = startKafkaPair(t, prefix, env)
	friend = rawClient(t, b.MQTTAddr(), 2, "friend-2", 5, true)
	warm := mustDirect(t, context.Background(), a, warmUpUser, 2)
	// Node b's consumer starts at the newest offset, and reads only once
	// its group joined: wait until sends on node a reach friend.
	testkit.WaitFor(t, 60*time.Second, "node b consuming chat.events", func() bool {
		mustSendAs(t, a, warm.ID, warmUpUser, "warm-up")
		select {
		case pk := <-friend.Publishes:
			var ev event
			return json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventMessageNew
		case <-time.After(time.Second):
			return false
		}
	})
	share(a)
	return a, b, friend
}

// TestAGracefulShutdownAnnouncesItsUsersOfflineOnOtherNodes: a node
// that stops gracefully lets the presence grace of the users it
// disconnected run out and announces those who did not come back
// elsewhere offline to the other nodes' watchers, as it does for a
// disconnect; they used to stay "online" there until someone asked.
func TestAGracefulShutdownAnnouncesItsUsersOfflineOnOtherNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two nodes and Kafka")
	}
	a, b, friend, _ := presencePair(t, "gs")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatalf("close node A: %v", err)
	}
	if ev := nextPresence(t, friend, 1, 15*time.Second); *ev.Online {
		t.Fatalf("node A stopped: %+v", ev)
	}
	if code, p := queryPresence(t, b, 2, 1); code != 200 || p.Online {
		t.Fatalf("query on B after node A stopped: %d %+v", code, p)
	}
}

// presenceSeen is a presence event as a watcher reads it, hidden included.
type presenceSeen struct {
	Type     string     `json:"type"`
	UserID   int64      `json:"userId"`
	Online   *bool      `json:"online"`
	LastSeen *time.Time `json:"lastSeen"`
	Hidden   bool       `json:"hidden"`
}

// nextPresenceSeen waits for a presence event about user on c, whatever it
// says.
func nextPresenceSeen(t *testing.T, c *mqtttest.Client, user int64, timeout time.Duration) presenceSeen {
	t.Helper()
	var ev presenceSeen
	nextPublish(t, c, fmt.Sprintf("presence event about user %d", user), timeout, func(pk packets.Packet) bool {
		ev = presenceSeen{}
		return json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventPresence && ev.UserID == user
	})
	return ev
}

// TestAUserWhoHidesTheirPresenceStopsShowingOnlineToTheirContacts: a
// contact who was told "online" learns at once that they may no longer
// see it, when the user turns presence off or blocks them (else they
// would show the user online for good: the user's later disconnect is
// no longer announced to them), and the user's current state when they
// may see it again.
func TestAUserWhoHidesTheirPresenceStopsShowingOnlineToTheirContacts(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_PRESENCE_PUSH": "true"})
	mustDirect(t, context.Background(), srv, 1, 2)
	friend := rawClient(t, srv.MQTTAddr(), 2, "friend-2", 5, true)
	rawClient(t, srv.MQTTAddr(), 1, "dev-1", 5, true)
	if ev := nextPresenceSeen(t, friend, 1, 5*time.Second); ev.Online == nil || !*ev.Online || ev.Hidden {
		t.Fatalf("user 1 connected: %+v", ev)
	}
	hidden := func(what string) {
		t.Helper()
		ev := nextPresenceSeen(t, friend, 1, 5*time.Second)
		if !ev.Hidden || ev.Online == nil || *ev.Online || ev.LastSeen != nil {
			t.Fatalf("%s: %+v, want online false, hidden, no lastSeen", what, ev)
		}
	}
	online := func(what string) {
		t.Helper()
		ev := nextPresenceSeen(t, friend, 1, 5*time.Second)
		if ev.Hidden || ev.Online == nil || !*ev.Online || ev.LastSeen == nil {
			t.Fatalf("%s: %+v, want online with lastSeen", what, ev)
		}
	}
	if code := api(t, srv, 1, "PUT", "/v1/me/settings", map[string]any{"presence": false}, nil); code != 200 {
		t.Fatalf("presence off: %d", code)
	}
	hidden("presence turned off")
	if code := api(t, srv, 1, "PUT", "/v1/me/settings", map[string]any{"presence": true}, nil); code != 200 {
		t.Fatalf("presence on: %d", code)
	}
	online("presence turned on again")
	if code := api(t, srv, 1, "PUT", "/v1/me/blocks/2", nil, nil); code != 204 {
		t.Fatalf("block: %d", code)
	}
	hidden("blocked by user 1")
	if code := api(t, srv, 1, "DELETE", "/v1/me/blocks/2", nil, nil); code != 204 {
		t.Fatalf("unblock: %d", code)
	}
	online("unblocked by user 1")
	// A settings change that leaves presence as it was tells nobody.
	if code := api(t, srv, 1, "PUT", "/v1/me/settings", map[string]any{"readReceipts": false}, nil); code != 200 {
		t.Fatalf("read receipts off: %d", code)
	}
	noPresence(t, friend, 1, 500*time.Millisecond)
}

// TestAConnectionTakenOverOnAnotherNodeStaysOnlineWhenTheOldOneEnds: a
// device that reconnected to another node with the same client id took
// the session's presence flag there; the old connection, still open here
// (the takeover notice has not closed it yet, or was lost), must not take
// the flag back at this node's heartbeat, or its end clears it and the
// user, online on the other node, is announced offline.
func TestAConnectionTakenOverOnAnotherNodeStaysOnlineWhenTheOldOneEnds(t *testing.T) {
	t.Parallel()
	srv, friend, phone := watchedPhone(t, time.Second)
	ctx := context.Background()
	// What the other node's takeover wrote (its heartbeat kept fresh for
	// the test's length).
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO chat_node (node_id, heartbeat_at) VALUES ('other-node', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Pool.Exec(ctx, `UPDATE chat_session SET node_id = 'other-node', conn_token = 'other-node/1/1' WHERE client_id = 'phone-1'`); err != nil {
		t.Fatal(err)
	}
	// Let this node beat once with the old connection still open.
	beat := func() (at time.Time) {
		if err := srv.Pool.QueryRow(ctx, `SELECT heartbeat_at FROM chat_node WHERE node_id = $1`, srv.Settings.NodeID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := beat()
	testkit.WaitFor(t, 15*time.Second, "this node's next heartbeat", func() bool { return beat().After(before) })
	phone.Drop()
	noPresence(t, friend, 1, 3*time.Second) // past the grace
	if code, p := queryPresence(t, srv, 2, 1); code != 200 || !p.Online {
		t.Fatalf("the old connection ended, the session is on the other node: %d %+v", code, p)
	}
}

// TestANodeTakenForDeadAnnouncesItsUsersOnlineAgain: a node whose
// heartbeat lapsed past the TTL while it ran (its database out of its
// reach for a while) is taken for dead by another node, which clears its
// connections and announces its users offline. When it beats again it
// restores them and announces its users online again, or they would show
// offline until they reconnected.
func TestANodeTakenForDeadAnnouncesItsUsersOnlineAgain(t *testing.T) {
	t.Parallel()
	srv, friend, _ := watchedPhone(t, time.Second)
	// What another node does to a node it takes for dead (ReapNodes).
	if _, err := srv.Pool.Exec(context.Background(), `
		WITH dead AS (DELETE FROM chat_node WHERE node_id = $1 RETURNING node_id)
		UPDATE chat_session SET node_id = NULL WHERE node_id IN (SELECT node_id FROM dead)`, srv.Settings.NodeID); err != nil {
		t.Fatal(err)
	}
	if code, p := queryPresence(t, srv, 2, 1); code != 200 || p.Online {
		t.Fatalf("node taken for dead: %d %+v", code, p)
	}
	// The node beats every 5 s.
	if ev := nextPresence(t, friend, 1, 15*time.Second); !*ev.Online {
		t.Fatalf("node beating again: %+v", ev)
	}
	if code, p := queryPresence(t, srv, 2, 1); code != 200 || !p.Online {
		t.Fatalf("node beating again: %d %+v", code, p)
	}
}

// TestUsersOfANodeKilledAndRestartedAtOnceAreAnnouncedOfflineOnTheOthers:
// a node killed and restarted with the same id before its heartbeat ran
// out (a supervisor restarts it at once) clears the connections its
// previous process left; the users who held them and do not come back
// within the grace are announced offline, as for any disconnect. They
// used to show online on the other nodes for good: the node that cleared
// their connections told nobody, and no other node could tell it had
// died.
func TestUsersOfANodeKilledAndRestartedAtOnceAreAnnouncedOfflineOnTheOthers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url, kafka := pgtest.NewDB(t), startKafka(t)
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "restart-b", "CHAT_PRESENCE_PUSH": "true"})
	mustDirect(t, context.Background(), b, 1, 2)
	warmConv := mustDirect(t, context.Background(), b, 3, 2)
	bin := buildChatd(t)
	aAddr := testkit.FreeAddr(t)
	env := []string{"CHAT_DATABASE_URL=" + url, "CHAT_DATA_DIR=" + t.TempDir(),
		"CHAT_KAFKA_BROKERS=" + kafka, "CHAT_NODE_ID=restart-a", "CHAT_PRESENCE_PUSH=true", "CHAT_LOG_LEVEL=warn"}
	a := startProcess(t, bin, aAddr, os.Stderr, env...)
	friend := rawClient(t, b.MQTTAddr(), 2, "friend-2", 5, true)
	warmUp(t, rawClient(t, aAddr, 3, "warm-3", 5, true), warmConv.ID, friend)
	rawClient(t, aAddr, 1, "dev-1", 5, true)
	if ev := nextPresence(t, friend, 1, 15*time.Second); !*ev.Online {
		t.Fatalf("user 1 connected to node A: %+v", ev)
	}
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	startProcess(t, bin, aAddr, os.Stderr, env...)
	restarted := time.Now()
	// Within friend's keepalive: it sends nothing meanwhile.
	offlineAnnounced(t, friend, b, restarted, 30*time.Second, "node A restarted without user 1")
}

// warmUp sends from warm (a client of node A) into conv until friend (a
// member, on node B) gets the message: node B's consumer reads only once
// its group joined.
func warmUp(t *testing.T, warm *mqtttest.Client, conv int64, friend *mqtttest.Client) {
	t.Helper()
	testkit.WaitFor(t, 60*time.Second, "node b consuming chat.events", func() bool {
		if ack, err := warm.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(newID(), "warm-up")); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("warm-up send: %v", err)
		}
		deadline := time.After(time.Second)
		for {
			select {
			case pk := <-friend.Publishes:
				var ev event
				if json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventMessageNew {
					return true
				}
			case <-deadline:
				return false
			}
		}
	})
}

// TestUsersOfAKilledNodeAreAnnouncedOfflineOnTheOthers: a node killed
// (SIGKILL: no shutdown announces anything) leaves its users' watchers on
// the other nodes told "online"; once its heartbeat ran out, a live node
// takes its connections over and announces those users offline, last
// seen when the dead node last vouched for them, and the query says the
// same. They used to show online for good, and the query's lastSeen
// ignored the connection the dead node held (null for a user who never
// disconnected before).
func TestUsersOfAKilledNodeAreAnnouncedOfflineOnTheOthers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url, kafka := pgtest.NewDB(t), startKafka(t)
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "crash-b", "CHAT_PRESENCE_PUSH": "true"})
	mustDirect(t, context.Background(), b, 1, 2)
	warmConv := mustDirect(t, context.Background(), b, 3, 2)
	// Node A is a process of its own, so that it can be killed.
	aAddr := testkit.FreeAddr(t)
	a := startProcess(t, buildChatd(t), aAddr, os.Stderr, "CHAT_DATABASE_URL="+url, "CHAT_DATA_DIR="+t.TempDir(),
		"CHAT_KAFKA_BROKERS="+kafka, "CHAT_NODE_ID=crash-a", "CHAT_PRESENCE_PUSH=true", "CHAT_LOG_LEVEL=warn")
	friend := rawClient(t, b.MQTTAddr(), 2, "friend-2", 5, true)
	warmUp(t, rawClient(t, aAddr, 3, "warm-3", 5, true), warmConv.ID, friend)
	connected := time.Now()
	rawClient(t, aAddr, 1, "dev-1", 5, true)
	if ev := nextPresence(t, friend, 1, 15*time.Second); !*ev.Online {
		t.Fatalf("user 1 connected to node A: %+v", ev)
	}
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The heartbeat runs out after 15 s; node B beats every 5 s. (Within
	// friend's keepalive: it sends nothing meanwhile.)
	ev := nextPresence(t, friend, 1, 35*time.Second)
	if *ev.Online {
		t.Fatalf("node A killed: %+v", ev)
	}
	if ev.LastSeen.Before(connected.Add(-time.Second)) || ev.LastSeen.After(killed) {
		t.Fatalf("last seen %v, want the dead node's last heartbeat, between the connect (%v) and the kill (%v)",
			ev.LastSeen, connected, killed)
	}
	t.Logf("offline announced %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	code, p := queryPresence(t, b, 2, 1)
	if code != 200 || p.Online || p.LastSeen == nil || !p.LastSeen.Equal(*ev.LastSeen) {
		t.Fatalf("query on B after node A died: %d %+v, want offline last seen %v", code, p, ev.LastSeen)
	}
}

// TestAnOfflineEventsLastSeenIsTheOneThePresenceQueryAnswers: a watcher
// told a user went offline, last seen at some instant, asks for the
// user's presence and gets that same instant. The event carried the
// node's clock at the disconnect, the query the database's at the write
// that recorded it: two instants for one departure.
func TestAnOfflineEventsLastSeenIsTheOneThePresenceQueryAnswers(t *testing.T) {
	t.Parallel()
	srv, friend, phone := watchedPhone(t, 500*time.Millisecond)
	phone.Drop()
	ev := nextPresence(t, friend, 1, 10*time.Second)
	if *ev.Online {
		t.Fatalf("after the drop: %+v, want offline", ev)
	}
	code, p := queryPresence(t, srv, 2, 1)
	if code != 200 || p.Online || p.LastSeen == nil || !p.LastSeen.Equal(*ev.LastSeen) {
		t.Fatalf("presence query after the offline event (last seen %v): %d %+v, want offline last seen then", ev.LastSeen, code, p)
	}
}
