package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mochi-mqtt/server/v2/packets"
	dto "github.com/prometheus/client_model/go"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// resume reconnects clientID without clean start and without subscribing,
// as a client whose session is present does.
func resume(t *testing.T, addr string, user int64, clientID string, v byte) (*mqtttest.Client, packets.Packet) {
	t.Helper()
	return dialAs(t, addr, user, clientID, v, false)
}

// resumePresent resumes a persistent session and wants chatd to have
// kept it (CONNACK session present); what says what failed when not.
func resumePresent(t *testing.T, addr string, user int64, clientID string, v byte, what string) *mqtttest.Client {
	t.Helper()
	c, ack := resume(t, addr, user, clientID, v)
	if !ack.SessionPresent {
		t.Fatalf("v%d: %s", v, what)
	}
	return c
}

// waitCursor waits until the session's delivered cursor reached seq: the
// client's PUBACKs were all taken before it disconnects.
func waitCursor(t *testing.T, srv *server.Server, clientID string, conv, seq int64) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("the cursor of %s at %d", clientID, seq), func() bool {
		var got int64
		_ = srv.Pool.QueryRow(context.Background(), `SELECT delivered_seq FROM session_cursor WHERE client_id = $1 AND conversation_id = $2`, clientID, conv).Scan(&got)
		return got >= seq
	})
}

// A persistent session's whole state is in PostgreSQL: it resumes with its
// subscriptions (session present, no SUBSCRIBE needed) on another node and
// after a restart, and gets what it missed meanwhile.
func TestPersistentSessionResumesWithItsSubscriptionsOnAnotherNodeAndAfterARestart(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	a := startNode(t, url, nil)
	b := startNode(t, url, withNodeID(nil, "b"))
	conv := mustGroup(t, context.Background(), a, 1, "resume", []int64{2})
	send := func(n int, tag string) {
		t.Helper()
		for i := range n {
			mustSendAs(t, a, conv.ID, 1, fmt.Sprint(tag, i))
		}
	}
	for _, v := range []byte{5, 4} {
		clientID := fmt.Sprintf("phone-v%d", v)
		before := parkSession(t, a, 2, clientID, v, conv.ID)

		send(3, "while away")
		other := resumePresent(t, b.MQTTAddr(), 2, clientID, v, "the other node answered session present = false for a persistent session")
		assertInOrder(t, collectMessages(t, other, conv.ID, 3, 15*time.Second), before+1)
		waitCursor(t, b, clientID, conv.ID, before+3)
		disconnect(t, b, other, clientID)

		send(2, "while restarting")
		a = restartNode(t, a, url, nil)
		again := resumePresent(t, a.MQTTAddr(), 2, clientID, v, "after a restart the node answered session present = false")
		assertInOrder(t, collectMessages(t, again, conv.ID, 2, 15*time.Second), before+4)
		disconnect(t, a, again, clientID)
	}
}

// An offline persistent session costs the broker nothing: mochi forgets
// the client when it disconnects (PostgreSQL has it all).
func TestOfflinePersistentSessionsLeaveNothingInTheBroker(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	before := srv.Broker.Server.Clients.Len()
	for i := range 20 {
		v := byte(5 - i%2)
		c := rawClient(t, srv.MQTTAddr(), int64(100+i), fmt.Sprint("parked-", i), v, false)
		c.Disconnect()
	}
	testkit.WaitFor(t, 10*time.Second, "the broker to forget the offline sessions", func() bool {
		return srv.Broker.Server.Clients.Len() == before
	})
	var n int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_session WHERE client_id LIKE 'parked-%' AND persistent AND subscriptions IS NOT NULL`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("%d persistent sessions with their subscriptions in PostgreSQL, want 20 (%v)", n, err)
	}
}

// SUBACK and UNSUBACK mean recorded: the session's subscriptions in
// PostgreSQL are what the client was told.
func TestSubscriptionsAreRecordedBeforeTheyAreAcknowledged(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	c := rawClient(t, srv.MQTTAddr(), 7, "recorded", 5, false)
	recorded := func() []chat.Subscription {
		t.Helper()
		var raw []byte
		if err := srv.Pool.QueryRow(context.Background(), `SELECT subscriptions FROM chat_session WHERE client_id = 'recorded'`).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var subs []chat.Subscription
		if err := json.Unmarshal(raw, &subs); err != nil {
			t.Fatal(err)
		}
		return subs
	}
	if subs := recorded(); len(subs) != 1 || subs[0].Filter != testnode.EventsTopic(7) || subs[0].QoS != 1 {
		t.Fatalf("after SUBACK the session records %+v", subs)
	}
	if codes, err := c.Unsubscribe(testnode.EventsTopic(7)); err != nil || len(codes) != 1 || codes[0] != 0 {
		t.Fatalf("unsubscribe: %v %v", codes, err)
	}
	if subs := recorded(); len(subs) != 0 {
		t.Fatalf("after UNSUBACK the session records %+v", subs)
	}
	c.Disconnect()
	// Resumed without a subscription: present, and nothing delivered until
	// the client subscribes.
	back := resumePresent(t, srv.MQTTAddr(), 7, "recorded", 5, "session not present")
	if srv.Hub.Ready("recorded") {
		t.Fatal("delivery ready without a subscription to the events topic")
	}
	back.Disconnect()
}

// A v5 DISCONNECT may change the session expiry; 0 ends the session then
// and there: the next connection starts a new one and is owed nothing.
func TestDisconnectSetsTheSessionExpiryAndZeroEndsTheSession(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv, err := srv.Service.CreateGroup(context.Background(), 1, "expiry", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	c := rawClient(t, srv.MQTTAddr(), 2, "expiring", 5, false)
	c.DisconnectWith(packets.Properties{SessionExpiryInterval: 120, SessionExpiryIntervalFlag: true})
	testkit.WaitFor(t, 5*time.Second, "expiry recorded", func() bool {
		var secs int64
		_ = srv.Pool.QueryRow(context.Background(), `SELECT expiry_seconds FROM chat_session WHERE client_id = 'expiring'`).Scan(&secs)
		return secs == 120
	})
	c = resumePresent(t, srv.MQTTAddr(), 2, "expiring", 5, "session with a new expiry not present")
	c.DisconnectWith(packets.Properties{SessionExpiryInterval: 0, SessionExpiryIntervalFlag: true})
	testkit.WaitFor(t, 5*time.Second, "session ended", func() bool {
		var n int
		_ = srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_session WHERE client_id = 'expiring'`).Scan(&n)
		return n == 0
	})
	mustSendAs(t, srv, conv.ID, 1, "after the end")
	fresh, ack := resume(t, srv.MQTTAddr(), 2, "expiring", 5)
	if ack.SessionPresent {
		t.Fatal("an ended session is present")
	}
	if codes, err := fresh.Subscribe(testnode.EventsTopic(2)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	select {
	case pk := <-fresh.Publishes:
		var ev event
		_ = json.Unmarshal(pk.Payload, &ev)
		if ev.Type == chat.EventMessageNew {
			t.Fatalf("a new session got a message sent before it started: %s", pk.Payload)
		}
	case <-time.After(time.Second):
	}
}

// The session expiry a client asked for is capped, and the CONNACK says
// so.
func TestConnackAnnouncesACappedSessionExpiry(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "forever", Username: "3",
		Password: testnode.Token(t, 3), Clean: true, Expiry: 30 * 24 * 3600})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Drop()
	if !ack.Properties.SessionExpiryIntervalFlag || ack.Properties.SessionExpiryInterval != 7*24*3600 {
		t.Fatalf("CONNACK session expiry %d (flag %v), want the cap of 7 days", ack.Properties.SessionExpiryInterval, ack.Properties.SessionExpiryIntervalFlag)
	}
}

// chatd writes every delivery itself, so mochi's topic tree holds no chat
// subscription (memory per connection, and nothing is ever routed
// through it): not after a SUBSCRIBE, not after a resume restores one.
// The client's own list still has them, deliveries still arrive, and an
// UNSUBSCRIBE answers a held filter as removed and an unknown one as "no
// subscription existed", as before.
func TestChatSubscriptionsTakeNoPlaceInMochisTopicTree(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	wild := "chat/v1/user/7/#"
	inTree := func() bool {
		t.Helper()
		for _, topic := range []string{testnode.EventsTopic(7), "chat/v1/user/7/replies"} {
			if _, ok := srv.Broker.Server.Topics.Subscribers(topic).Subscriptions["untreed"]; ok {
				return true
			}
		}
		return false
	}
	c := rawClient(t, srv.MQTTAddr(), 7, "untreed", 5, false)
	if codes, err := c.Subscribe(wild); err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		t.Fatalf("subscribe %s: %v %v", wild, codes, err)
	}
	if inTree() {
		t.Fatal("after SUBSCRIBE mochi's topic tree holds the client's subscriptions")
	}
	if n := len(srv.Broker.Server.Topics.Subscribers(testnode.EventsTopic(7)).Subscriptions); n != 0 {
		t.Fatalf("%d subscribers of the events topic in mochi's tree, want 0", n)
	}
	c.Disconnect()
	back := resumePresent(t, srv.MQTTAddr(), 7, "untreed", 5, "session not present")
	if inTree() {
		t.Fatal("after a resume mochi's topic tree holds the restored subscriptions")
	}
	testkit.WaitFor(t, 5*time.Second, "delivery to be ready on the restored subscriptions", func() bool {
		return srv.Hub.Ready("untreed")
	})
	conv, err := srv.Service.CreateGroup(context.Background(), 8, "untreed", []int64{7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Service.Send(context.Background(), chat.SendRequest{ConversationID: conv.ID, SenderID: 8,
		ClientMsgID: uuid.NewString(), Body: "still delivered"}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, back, "message.new", 10*time.Second); ev.Body != "still delivered" {
		t.Fatalf("delivered %+v", ev)
	}
	codes, err := back.Unsubscribe(wild, testnode.EventsTopic(7), "chat/v1/user/7/never")
	if err != nil || len(codes) != 3 || codes[0] != 0 || codes[1] != 0 || codes[2] != packets.CodeNoSubscriptionExisted.Code {
		t.Fatalf("unsubscribe two held filters and one never held: %v %v, want [0 0 17]", codes, err)
	}
	if inTree() || back.Closed() {
		t.Fatal("after UNSUBSCRIBE the tree holds a subscription or the client was disconnected")
	}
}

// A persistent session taken over on its node (the device reconnects with
// its client id while its old connection is still open) keeps the
// subscriptions recorded in PostgreSQL: mochi's clean-up of the old
// connection is not the client unsubscribing. The takeover's subscriptions
// are checked once the CONNACK is in (mochi has done with the old client by
// then), and the next resume must still get events without subscribing.
func TestPersistentSessionTakeoverKeepsItsRecordedSubscriptions(t *testing.T) {
	t.Parallel()
	for _, v := range []byte{4, 5} {
		srv, conv := startDirect(t, nil)
		clientID := fmt.Sprintf("phone-takeover-v%d", v)
		recorded := func() string { t.Helper(); return sessionColumn(t, srv, clientID, "subscriptions") }
		old := rawClient(t, srv.MQTTAddr(), 2, clientID, v, false)
		before := recorded()
		again := resumePresent(t, srv.MQTTAddr(), 2, clientID, v, "takeover of a persistent session answered session present = false")
		testkit.WaitFor(t, 5*time.Second, "the old connection closed", old.Closed)
		if after := recorded(); after != before {
			t.Fatalf("v%d: the takeover changed the recorded subscriptions from %s to %s", v, before, after)
		}
		again.Drop()
		testkit.WaitFor(t, 5*time.Second, "session parked", func() bool { return srv.Hub.Session(clientID) == nil })
		third := resumePresent(t, srv.MQTTAddr(), 2, clientID, v, "resume after the takeover answered session present = false")
		mustSendAs(t, srv, conv.ID, 1, "after")
		if ev := nextEvent(t, third, chat.EventMessageNew, 10*time.Second); ev.Body != "after" {
			t.Fatalf("v%d: delivered %+v", v, ev)
		}
		disconnect(t, srv, third, clientID)
	}
}

// nodesWithoutTakeoverNotice starts two nodes a and b on one database;
// a gets no takeover notice from b, so an old connection on a stays open
// while its device reconnects to b (a late or lost notice).
func nodesWithoutTakeoverNotice(t *testing.T) (a, b *server.Server) {
	t.Helper()
	url := pgtest.NewDB(t)
	a = startNode(t, url, nil, server.WithoutTakeoverWatch())
	b = startNode(t, url, withNodeID(nil, "b"))
	return a, b
}

// A device that reconnects to another node while its old connection on
// the first is still open (the first node's takeover notice is late or
// lost: here it gets none) does not lose its session when that old
// connection finally ends: the old connection
// neither deletes the session (it was a clean one) nor restarts its expiry
// clock with its own expiry (a persistent one). Only the connection that
// opened the session last may end it. The first node's broker forgetting
// the old client is the barrier: mochi does that after OnDisconnect, which
// does the deleting and touching, returned.
func TestAnOldConnectionOnAnotherNodeLeavesTheReconnectedSessionAlone(t *testing.T) {
	t.Parallel()
	a, b := nodesWithoutTakeoverNotice(t)
	conv := mustGroup(t, context.Background(), a, 1, "moved", []int64{2})
	expiry := func(clientID string) string { t.Helper(); return sessionColumn(t, a, clientID, "expiry_seconds") }
	for _, v := range []byte{5, 4} {
		// A clean connection on a, then the device's persistent session on b.
		clientID := fmt.Sprintf("moved-clean-v%d", v)
		old := rawClient(t, a.MQTTAddr(), 2, clientID, v, true)
		moved := rawClient(t, b.MQTTAddr(), 2, clientID, v, false)
		if old.Closed() {
			t.Fatalf("v%d: the old connection on the other node was closed", v)
		}
		old.Drop()
		testkit.WaitFor(t, 5*time.Second, "a to forget the old connection", brokerForgot(a, clientID))
		expiry(clientID) // the session's row is still there
		disconnect(t, b, moved, clientID)
		mustSendAs(t, a, conv.ID, 1, "while away")
		back := resumePresent(t, b.MQTTAddr(), 2, clientID, v, "the reconnected session was lost to the old connection's end")
		if ev := nextEvent(t, back, chat.EventMessageNew, 10*time.Second); ev.Body != "while away" {
			t.Fatalf("v%d: delivered %+v", v, ev)
		}
		disconnect(t, b, back, clientID)
	}
}

// The same for an old persistent connection: its end does not restart the
// session's expiry clock with its own (short) expiry after the connection
// on the other node recorded the session's (long) one when the device left
// it.
func TestAnOldConnectionOnAnotherNodeLeavesTheReconnectedSessionsExpiryAlone(t *testing.T) {
	t.Parallel()
	a, b := nodesWithoutTakeoverNotice(t)
	expiry := func(clientID string) string { t.Helper(); return sessionColumn(t, a, clientID, "expiry_seconds") }
	clientID := "moved-persistent"
	old, _, err := mqtttest.Dial(a.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: clientID, Username: "2", Password: testnode.Token(t, 2), Expiry: 60})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Drop)
	moved := rawClient(t, b.MQTTAddr(), 2, clientID, 5, false) // 3600 s
	disconnect(t, b, moved, clientID)
	testkit.WaitFor(t, 5*time.Second, "b to record the session's expiry", func() bool { return expiry(clientID) == "3600" })
	old.Drop()
	testkit.WaitFor(t, 5*time.Second, "a to forget the old connection", brokerForgot(a, clientID))
	if secs := expiry(clientID); secs != "3600" {
		t.Fatalf("the old connection's end set the session's expiry to %s s, want the 3600 s of the connection that left it last", secs)
	}
}

// A device that reconnects to another node while its old connection on
// the first is still open (a phone that moved from Wi-Fi to cellular, its
// old socket half-open) has that old connection closed by the first node,
// as the server must close the existing connection of a client id that
// connects again (MQTT-3.1.4-3): with DISCONNECT 0x8E (session taken
// over) on MQTT 5, by closing the socket on 3.1.1. The session goes on on
// the second node, whose own connection stays open.
func TestAReconnectOnAnotherNodeClosesTheOldConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	a := startNode(t, url, nil)
	b := startNode(t, url, withNodeID(nil, "b"))
	conv := mustGroup(t, context.Background(), a, 1, "moving", []int64{2})
	var clientID string
	for i, v := range []byte{5, 4} {
		for _, clean := range []bool{false, true} {
			clientID = fmt.Sprintf("moving-v%d-clean-%v", v, clean)
			old := rawClient(t, a.MQTTAddr(), 2, clientID, v, clean)
			moved := rawClient(t, b.MQTTAddr(), 2, clientID, v, clean)
			// A failure seen once under CI load (no message.new on the
			// moved connection) did not say where it stood: say it,
			// before the connections are dropped.
			t.Cleanup(func(id string) func() {
				return func() {
					if t.Failed() && id == clientID {
						t.Logf("%s: session on the second node %v, ready %v; on the first node %v; moved closed %v",
							id, b.Hub.Session(id) != nil, b.Hub.Ready(id), a.Hub.Session(id) != nil, moved.Closed())
					}
				}
			}(clientID))
			testkit.Receive(t, old.Done, 10*time.Second, fmt.Sprintf("v%d clean=%v: the old connection on the other node is still open", v, clean))
			checkTakenOverDisconnect(t, old, v)
			testkit.WaitFor(t, 5*time.Second, "a to forget the old connection", brokerForgot(a, clientID))
			body := fmt.Sprintf("after the move v%d %v", v, clean)
			mustSendAs(t, b, conv.ID, 1, body)
			if ev := nextEvent(t, moved, chat.EventMessageNew, 10*time.Second); ev.Body != body {
				t.Fatalf("v%d clean=%v: the moved connection got %+v", v, clean, ev)
			}
			if moved.Closed() {
				t.Fatalf("v%d clean=%v: the moved connection was closed", v, clean)
			}
			if !clean {
				disconnect(t, b, moved, clientID)
			} else {
				moved.Disconnect()
			}
		}
		if n := counter(t, a, "chat_mqtt_taken_over_total"); n != float64(2*(i+1)) {
			t.Fatalf("after v%d: chat_mqtt_taken_over_total on the first node = %v, want %d", v, n, 2*(i+1))
		}
	}
	if n := counter(t, b, "chat_mqtt_taken_over_total"); n != 0 {
		t.Fatalf("chat_mqtt_taken_over_total on the second node = %v, want 0", n)
	}
}

// counter is the value of an unlabelled counter of srv's registry.
func counter(t *testing.T, srv *server.Server, name string) float64 {
	t.Helper()
	return unlabelled(t, srv, name).GetCounter().GetValue()
}

// unlabelled is the one metric of the family name in srv's registry.
func unlabelled(t *testing.T, srv *server.Server, name string) *dto.Metric {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("no unlabelled metric %s", name)
	return nil
}

// brokerForgot says when srv's broker no longer lists clientID: mochi
// removes an ended connection's client after OnDisconnect returned.
func brokerForgot(srv *server.Server, clientID string) func() bool {
	return func() bool { _, ok := srv.Broker.Server.Clients.Get(clientID); return !ok }
}

// Nor does that old connection rewrite the session's recorded
// subscriptions: an UNSUBSCRIBE it still reads (its socket works, as a
// half-open one's can) is about that connection, not about the session
// the device resumed elsewhere, whose next resume must still get events.
func TestAnOldConnectionOnAnotherNodeLeavesTheReconnectedSessionsSubscriptionsAlone(t *testing.T) {
	t.Parallel()
	a, b := nodesWithoutTakeoverNotice(t)
	conv := mustGroup(t, context.Background(), a, 1, "subs", []int64{2})
	for _, v := range []byte{5, 4} {
		clientID := fmt.Sprintf("moved-subs-v%d", v)
		recorded := func() string { t.Helper(); return sessionColumn(t, a, clientID, "subscriptions") }
		old := rawClient(t, a.MQTTAddr(), 2, clientID, v, false)
		moved := rawClient(t, b.MQTTAddr(), 2, clientID, v, false)
		want := recorded()
		if codes, err := old.Unsubscribe(testnode.EventsTopic(2)); err != nil || (v == 5 && len(codes) != 1) {
			t.Fatalf("v%d: the old connection's UNSUBSCRIBE: %v %v", v, codes, err)
		}
		// The hook records (or not) before the UNSUBACK's connection reads
		// its next packet: a PUBLISH answered after it is the barrier.
		if _, err := old.Publish(testnode.MsgTopic(999999), 1, testnode.SendPayload(newID(), "barrier")); err != nil {
			t.Fatalf("v%d: barrier: %v", v, err)
		}
		if got := recorded(); got != want {
			t.Fatalf("v%d: the old connection's UNSUBSCRIBE changed the session's subscriptions from %s to %s", v, want, got)
		}
		disconnect(t, b, moved, clientID)
		old.Drop()
		testkit.WaitFor(t, 5*time.Second, "a to forget the old connection", brokerForgot(a, clientID))
		body := fmt.Sprintf("while away v%d", v)
		mustSendAs(t, a, conv.ID, 1, body)
		back := resumePresent(t, b.MQTTAddr(), 2, clientID, v, "resume answered session present = false")
		if ev := nextEvent(t, back, chat.EventMessageNew, 10*time.Second); ev.Body != body {
			t.Fatalf("v%d: delivered %+v", v, ev)
		}
		disconnect(t, b, back, clientID)
	}
}

// sessionColumn reads one column of clientID's chat_session row as text
// ("NULL" for a null), failing the test if there is no such session.
func sessionColumn(t *testing.T, srv *server.Server, clientID, column string) string {
	t.Helper()
	var v *string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT `+column+`::text FROM chat_session WHERE client_id = $1`, clientID).Scan(&v); err != nil {
		t.Fatalf("the session of %s: %v", clientID, err)
	}
	if v == nil {
		return "NULL"
	}
	return *v
}

// A persistent session that was offline while its user left a group, or
// was removed from it, gets on reconnect what was committed up to the
// leave, as a connected one got it live (the offline view converges to
// the online one by catch-up alone), and nothing after it. A user added
// back meanwhile gets that too, then what follows the new join, and
// nothing committed while they were away.
func TestAnOfflineSessionGetsWhatWasCommittedUpToALeaveOnReconnect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		leave   func(t *testing.T, srv *server.Server, conv int64)
		readded bool
	}{
		{name: "removed by the owner", leave: func(t *testing.T, srv *server.Server, conv int64) {
			if err := srv.Service.RemoveMember(context.Background(), conv, 1, 2); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "left from another device", leave: func(t *testing.T, srv *server.Server, conv int64) {
			laptop := rawClient(t, srv.MQTTAddr(), 2, "laptop-2", 5, false)
			if err := srv.Service.RemoveMember(context.Background(), conv, 2, 2); err != nil {
				t.Fatal(err)
			}
			nextEvent(t, laptop, chat.EventMemberRemoved, 5*time.Second)
		}},
		{name: "removed and added back", readded: true, leave: func(t *testing.T, srv *server.Server, conv int64) {
			if err := srv.Service.RemoveMember(context.Background(), conv, 1, 2); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startNode(t, pgtest.NewDB(t), nil)
			ctx := context.Background()
			conv := mustGroup(t, ctx, srv, 1, "away", []int64{2, 3})
			send := func(n int, tag string) {
				t.Helper()
				for i := range n {
					if _, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 3, ClientMsgID: newID(), Body: fmt.Sprint(tag, i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := parkSession(t, srv, 2, "phone-2", 5, conv.ID)
			send(3, "while a member")
			tc.leave(t, srv, conv.ID)
			send(2, "after the leave")
			want, from, back := 3, before+1, int64(0)
			if tc.readded {
				if _, _, err := srv.Service.AddMember(ctx, conv.ID, 1, 2); err != nil {
					t.Fatal(err)
				}
				send(2, "after coming back")
				want, back = 5, lastSeq(srv, conv.ID)-1
			}
			last := lastSeq(srv, conv.ID)

			phone := resumePresent(t, srv.MQTTAddr(), 2, "phone-2", 5, "the persistent session was not resumed")
			got := collectMessages(t, phone, conv.ID, want, 10*time.Second)
			assertInOrder(t, got[:3], from)
			if tc.readded {
				assertInOrder(t, got[3:], back)
			}
			// Nothing else of the conversation follows: a sentinel in a
			// conversation the user stays in arrives after anything the
			// session would still have sent.
			other := mustGroup(t, ctx, srv, 1, "sentinel", []int64{2})
			if _, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: other.ID, SenderID: 1, ClientMsgID: newID(), Body: "sentinel"}); err != nil {
				t.Fatal(err)
			}
			for {
				pk := nextPublish(t, phone, "the sentinel", 10*time.Second, func(packets.Packet) bool { return true })
				var ev event
				_ = json.Unmarshal(pk.Payload, &ev)
				if ev.Type == chat.EventMessageNew && ev.ConversationID == other.ID {
					break
				}
				if ev.Type == chat.EventMessageNew && ev.ConversationID == conv.ID {
					t.Fatalf("after %d messages up to the leave (last seq %d) the session also got %s", want, last, pk.Payload)
				}
			}
			if tc.readded {
				return
			}
			// Delivered to the end, the left conversation's cursor has
			// served: the next resume forgets it, and replays nothing.
			waitCursor(t, srv, "phone-2", conv.ID, got[len(got)-1].Seq)
			disconnect(t, srv, phone, "phone-2")
			again, _ := resume(t, srv.MQTTAddr(), 2, "phone-2", 5)
			testkit.WaitFor(t, 5*time.Second, "the left conversation's cursor forgotten", func() bool {
				var n int
				_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM session_cursor WHERE client_id = 'phone-2' AND conversation_id = $1`, conv.ID).Scan(&n)
				return n == 0
			})
			noMessagesOf(t, again, conv.ID, 300*time.Millisecond, "a second resume replayed")
		})
	}
}

// A persistent session offline while its user was removed from a group
// replays, on reconnect, a message first edited after the removal with
// the body the user had read, not an empty one, and a reply to it quoting
// that body: what was written after the removal does not reach them, and
// what they read is not taken from them either.
func TestAnOfflineSessionReplaysAMessageFirstEditedAfterTheRemovalWithItsBodyThen(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "away", []int64{2, 3})
	parkSession(t, srv, 2, "phone-2", 5, conv.ID)
	const said = "see you at the station"
	msg, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 3, ClientMsgID: newID(), Body: said})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 3, ClientMsgID: newID(),
		Body: "and bring the map", ReplyTo: msg.Message.Seq}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Service.RemoveMember(ctx, conv.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Service.Edit(ctx, chat.EditRequest{ConversationID: conv.ID, UserID: 3, ClientMsgID: newID(),
		TargetSeq: msg.Message.Seq, Body: "see you at the airport, not them"}); err != nil {
		t.Fatal(err)
	}

	phone := resumePresent(t, srv.MQTTAddr(), 2, "phone-2", 5, "the persistent session was not resumed")
	type replayed struct {
		Type     string     `json:"type"`
		Seq      int64      `json:"seq"`
		Body     string     `json:"body"`
		EditedAt *time.Time `json:"editedAt"`
		ReplyTo  *struct {
			Snippet string `json:"snippet"`
		} `json:"replyTo"`
	}
	var got []replayed
	for len(got) < 2 {
		pk := nextPublish(t, phone, "the messages up to the removal", 10*time.Second, func(packets.Packet) bool { return true })
		var ev replayed
		if err := json.Unmarshal(pk.Payload, &ev); err != nil {
			t.Fatalf("bad payload %s: %v", pk.Payload, err)
		}
		if ev.Type == chat.EventMessageNew {
			got = append(got, ev)
		}
	}
	if got[0].Seq != msg.Message.Seq || got[0].Body != said || got[0].EditedAt != nil {
		t.Errorf("the message first edited after the removal replays as %+v, want seq %d %q, not edited", got[0], msg.Message.Seq, said)
	}
	if got[1].ReplyTo == nil || got[1].ReplyTo.Snippet != said {
		t.Errorf("the reply to it replays quoting %+v, want %q", got[1].ReplyTo, said)
	}
}
