package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// answerLosingNode starts a node whose every connection to its database
// goes through an AnswerLosing proxy.
func answerLosingNode(t *testing.T, env map[string]string) (*server.Server, *pgtest.AnswerLosing) {
	t.Helper()
	url := pgtest.NewDB(t)
	pool, err := pgembed.OpenPool(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	proxy := pgtest.NewAnswerLosing(t, pool)
	cc := proxy.Pool.Config().ConnConfig
	return startNode(t, fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cc.Host, cc.Port, cc.User, cc.Database), env), proxy
}

// TestAMessageWhoseCommitAnswerWasLostIsAckedAndReachesTheOtherMemberLive:
// alice's message committed, and the answer to its batch's COMMIT was
// lost with the connection. The node runs the batch again to learn what
// became of it: alice gets her PUBACK with the seq (a duplicate, which
// it is by then), bob, online, gets the message live, and her resend is
// the same duplicate. Before, alice got 0x80 and bob nothing: nothing
// else of the conversation came to expose the gap.
func TestAMessageWhoseCommitAnswerWasLostIsAckedAndReachesTheOtherMemberLive(t *testing.T) {
	t.Parallel()
	srv, proxy, conv, alice, bob := aliceAndBobThroughAnswerLosing(t)

	id, payload, ack, err := publishLosingItsAnswer(t, alice, conv.ID, "its answer is lost", proxy.LoseAnswer("chat_send_batch", nil))
	if n := countMessages(t, srv.Pool, conv.ID); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "1" {
		t.Errorf("alice's PUBACK: reason 0x%02x, seq %q, %v; want 0x00 with seq 1 (the message committed)",
			ack.ReasonCode, userProp(ack.Properties.User, "seq"), err)
	}
	if ev := nextEvent(t, bob, "message.new", 5*time.Second); ev.ClientMsgID != id || ev.Seq != 1 {
		t.Errorf("bob got %+v, want alice's message at seq 1", ev)
	}

	again, err := alice.Publish(testnode.MsgTopic(conv.ID), 1, payload)
	if err != nil || again.ReasonCode != 0 || userProp(again.Properties.User, "seq") != "1" || userProp(again.Properties.User, "duplicate") != "true" {
		t.Errorf("alice's resend: reason 0x%02x, %v, %v; want 0x00, the duplicate of seq 1", again.ReasonCode, again.Properties.User, err)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 1 {
		t.Errorf("%d messages stored after the resend, want 1", n)
	}
}

// TestAMessageCommittedWhileEveryAnswerWasLostReachesTheOtherMemberOnItsResend:
// the answer to alice's batch was lost, and so was the answer to the run
// that was to learn its outcome: alice is told to retry (0x80, no
// PUBACK that acknowledges it). Her resend answers the duplicate with
// the seq first assigned, and bob, online, gets the message then, live.
// Before, a duplicate was never published: bob got nothing until a later
// message of the conversation exposed the gap, or he reconnected.
func TestAMessageCommittedWhileEveryAnswerWasLostReachesTheOtherMemberOnItsResend(t *testing.T) {
	t.Parallel()
	srv, proxy, conv, alice, bob := aliceAndBobThroughAnswerLosing(t)

	var second <-chan struct{}
	first := proxy.LoseAnswer("chat_send_batch", func() { second = proxy.LoseAnswer("chat_send_batch", nil) })
	id := newID()
	payload := testnode.SendPayload(id, "every answer is lost")
	ack, err := alice.Publish(testnode.MsgTopic(conv.ID), 1, payload)
	for i, cut := range []*<-chan struct{}{&first, &second} {
		select {
		case <-*cut:
		case <-time.After(5 * time.Second):
			t.Fatalf("answer %d of the batch was not lost", i+1)
		}
	}
	if err != nil || ack.ReasonCode != 0x80 {
		t.Errorf("alice's PUBACK: reason 0x%02x, %v; want 0x80 (the node cannot tell that it committed)", ack.ReasonCode, err)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}

	resendReachesBobOnce(t, alice, bob, conv.ID, id, payload)
}

// TestAMemberAddWhoseCommitAnswerWasLostIsMadeOnceAndTheNewMemberGetsMessagesLive:
// alice adds carol to a group; the add committed, and the answer to its
// COMMIT was lost with the connection. The node asks PostgreSQL what
// became of it: alice is answered 201, carol (online) becomes a member
// of the node's fan-out, so alice's next message reaches her live, and
// bob gets the member.added entry; a repeat of the add answers 200 and
// adds nothing. Before, the add answered 503 and published nothing, its
// repeat 200 and nothing either: the node's member index never learnt
// of carol, who got no message of the group live until she reconnected.
func TestAMemberAddWhoseCommitAnswerWasLostIsMadeOnceAndTheNewMemberGetsMessagesLive(t *testing.T) {
	t.Parallel()
	srv, proxy, conv, bob, carol := teamOfAliceAndBobWithCarolOnline(t)

	cut := proxy.LoseAnswer("INSERT INTO conversation_member", nil)
	path := fmt.Sprintf("/v1/conversations/%d/members", conv.ID)
	first := httpDo(t, srv, 1, "POST", path, map[string]any{"userId": 3})
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the add's COMMIT was not lost")
	}
	if first.status != 201 {
		t.Errorf("the add whose COMMIT answer was lost: %d %s, want 201 (it committed)", first.status, first.body)
	}
	if again := httpDo(t, srv, 1, "POST", path, map[string]any{"userId": 3}); again.status != 200 {
		t.Errorf("the add repeated: %d %s, want 200 (carol is a member)", again.status, again.body)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
		t.Errorf("%d entries in the group, want 2 (the message and one member.added)", n)
	}
	mustSendAs(t, srv, conv.ID, 1, "hello carol")
	if ev := nextEvent(t, carol, "message.new", 5*time.Second); ev.Seq != 3 {
		t.Errorf("carol got %+v, want alice's message at seq 3", ev)
	}
	if ev := nextEvent(t, bob, "system.new", 5*time.Second); ev.Seq != 2 {
		t.Errorf("bob got %+v, want the member.added entry at seq 2", ev)
	}
}

// TestAGroupCreateWhoseCommitAnswerWasLostIsOneGroupRepeatedWithItsKey:
// alice creates a group with an Idempotency-Key; it committed, and the
// answer to its COMMIT was lost with the connection. The node asks
// PostgreSQL what became of it and answers 201 with the group; the
// repeat with the key answers 200 with the same group, and there is one
// group. Before, the create answered 503 (its repeat found the key's
// group: one group either way).
func TestAGroupCreateWhoseCommitAnswerWasLostIsOneGroupRepeatedWithItsKey(t *testing.T) {
	t.Parallel()
	srv, proxy := answerLosingNode(t, nil)
	cut := proxy.LoseAnswer("INSERT INTO group_create", nil)
	key := map[string]string{"Content-Type": "application/json", "Idempotency-Key": newID()}
	body := map[string]any{"type": "group", "title": "team", "members": []int64{2, 3}}
	first := request(t, srv, 1, "POST", "/v1/conversations", body, key)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the create's COMMIT was not lost")
	}
	again := request(t, srv, 1, "POST", "/v1/conversations", body, key)
	id := func(r httpReply) int64 { return decode[struct{ ID int64 }](t, r).ID }
	if first.status != 201 {
		t.Errorf("the create whose COMMIT answer was lost: %d %s, want 201 (it committed)", first.status, first.body)
	}
	if again.status != 200 || (first.status == 201 && id(again) != id(first)) {
		t.Errorf("the create repeated with its key: %d %s, want 200 with the first's group %s", again.status, again.body, first.body)
	}
	if n := pgtest.QueryOne[int64](t, srv.Pool, `SELECT count(*) FROM conversation WHERE type = 'GROUP'`); n != 1 {
		t.Errorf("%d groups, want 1", n)
	}
}

// TestAnOrdinaryResendDoesNotReplayOldMessagesToAFreshSession: bob
// connects with a clean session after alice's three messages; alice then
// resends her first (its PUBACK lost on a weak network, as happens on
// mobile), an ordinary duplicate whose first publishing was not in
// doubt. Bob's next message is alice's new one, not the three from
// before he connected: a duplicate is published again only when its
// first publishing may have been missed (its batch's answer was lost),
// not at every resend, where it started bob's fresh stream over at the
// old seq (an entry routed late) and replayed the conversation from
// there.
func TestAnOrdinaryResendDoesNotReplayOldMessagesToAFreshSession(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	conv := mustDirect(t, ctx, srv, 1, 2)
	first := chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "one"}
	if _, err := srv.Service.Send(ctx, first); err != nil {
		t.Fatal(err)
	}
	mustSendAs(t, srv, conv.ID, 1, "two")
	mustSendAs(t, srv, conv.ID, 1, "three")

	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	session := srv.Hub.Session("bob")
	if session == nil {
		t.Fatal("bob has no session")
	}
	select {
	case <-session.Loaded():
	case <-time.After(5 * time.Second):
		t.Fatal("bob's session did not load its cursors")
	}

	res, err := srv.Service.Send(ctx, first)
	if err != nil || !res.Duplicate || res.Message.Seq != 1 {
		t.Fatalf("alice's resend: %+v, %v; want the duplicate of seq 1", res, err)
	}
	mustSendAs(t, srv, conv.ID, 1, "four")
	if ev := nextEvent(t, bob, "message.new", 5*time.Second); ev.Seq != 4 {
		t.Errorf("bob's first message: seq %d %q, want alice's new one at seq 4 (nothing from before he connected)", ev.Seq, ev.Body)
	}
}

// TestAMessageCommittedWhoseAnswerCameAsAResetReachesTheOtherMemberOnItsResend:
// alice's batch committed, and the connection to PostgreSQL was reset
// where its answer was (a proxy or load balancer between them ends it
// with an RST). The node takes a reset for a batch that did not run and
// does not run it again: alice is told to retry (0x80). Her resend
// answers the duplicate with the seq first assigned, and bob, online,
// gets the message then, live, once.
func TestAMessageCommittedWhoseAnswerCameAsAResetReachesTheOtherMemberOnItsResend(t *testing.T) {
	t.Parallel()
	srv, proxy, conv, alice, bob := aliceAndBobThroughAnswerLosing(t)

	id, payload, ack, err := publishLosingItsAnswer(t, alice, conv.ID, "its answer is a reset", proxy.LoseAnswerReset("chat_send_batch", nil))
	if err != nil || ack.ReasonCode != 0x80 {
		t.Errorf("alice's PUBACK: reason 0x%02x, %v; want 0x80 (a reset is taken for a batch that did not run)", ack.ReasonCode, err)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}

	resendReachesBobOnce(t, alice, bob, conv.ID, id, payload)
}

// aliceAndBobThroughAnswerLosing is a node whose database connections go
// through proxy, and a direct conversation of alice (1) and bob (2) on
// it, both connected over MQTT 5 (alice a client to publish with).
func aliceAndBobThroughAnswerLosing(t *testing.T) (*server.Server, *pgtest.AnswerLosing, chat.Conversation, *mqtttest.Client, *mqtttest.Client) {
	t.Helper()
	srv, proxy := answerLosingNode(t, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	alice, _ := dialAs(t, srv.MQTTAddr(), 1, "alice", 5, true)
	return srv, proxy, conv, alice, bob
}

// teamOfAliceAndBobWithCarolOnline is a node whose database connections
// go through proxy, a group "team" of alice (1) and bob (2) on it, and bob
// and carol (3, not a member yet) connected over MQTT 5. Bob has got
// alice's message "before carol": the node routes the group's messages
// already, its members loaded as on a busy node.
func teamOfAliceAndBobWithCarolOnline(t *testing.T) (*server.Server, *pgtest.AnswerLosing, chat.Conversation, *mqtttest.Client, *mqtttest.Client) {
	t.Helper()
	srv, proxy := answerLosingNode(t, nil)
	conv := mustGroup(t, context.Background(), srv, 1, "team", []int64{2})
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol", 5, true)
	mustSendAs(t, srv, conv.ID, 1, "before carol")
	nextEvent(t, bob, "message.new", 5*time.Second)
	return srv, proxy, conv, bob, carol
}

// resendReachesBobOnce: alice's resend of payload (message id, told to
// retry) answers the duplicate of seq 1, and bob gets the message then,
// live, once.
func resendReachesBobOnce(t *testing.T, alice, bob *mqtttest.Client, conv int64, id string, payload []byte) {
	t.Helper()
	again, err := alice.Publish(testnode.MsgTopic(conv), 1, payload)
	if err != nil || again.ReasonCode != 0 || userProp(again.Properties.User, "seq") != "1" || userProp(again.Properties.User, "duplicate") != "true" {
		t.Errorf("alice's resend: reason 0x%02x, %v, %v; want 0x00, the duplicate of seq 1", again.ReasonCode, again.Properties.User, err)
	}
	if ev := nextEvent(t, bob, "message.new", 5*time.Second); ev.ClientMsgID != id || ev.Seq != 1 {
		t.Errorf("bob got %+v, want alice's message at seq 1", ev)
	}
	noMessagesOf(t, bob, conv, 300*time.Millisecond, "a second copy of alice's message")
}

// publishLosingItsAnswer publishes alice's message body into conv while
// cut (the proxy's LoseAnswer or LoseAnswerReset of the send batch) takes
// the answer to its batch's COMMIT, and returns the message's id, its
// payload (to resend) and alice's PUBACK.
func publishLosingItsAnswer(t *testing.T, alice *mqtttest.Client, conv int64, body string, cut <-chan struct{}) (string, []byte, packets.Packet, error) {
	t.Helper()
	id := newID()
	payload := testnode.SendPayload(id, body)
	ack, err := alice.Publish(testnode.MsgTopic(conv), 1, payload)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the batch's COMMIT was not lost")
	}
	return id, payload, ack, err
}
