package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	srv, proxy := answerLosingNode(t, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	alice, _ := dialAs(t, srv.MQTTAddr(), 1, "alice", 5, true)

	cut := proxy.LoseAnswer("chat_send_batch", nil)
	id := newID()
	payload := testnode.SendPayload(id, "its answer is lost")
	ack, err := alice.Publish(testnode.MsgTopic(conv.ID), 1, payload)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the batch's COMMIT was not lost")
	}
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
	srv, proxy := answerLosingNode(t, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	alice, _ := dialAs(t, srv.MQTTAddr(), 1, "alice", 5, true)

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

	again, err := alice.Publish(testnode.MsgTopic(conv.ID), 1, payload)
	if err != nil || again.ReasonCode != 0 || userProp(again.Properties.User, "seq") != "1" || userProp(again.Properties.User, "duplicate") != "true" {
		t.Errorf("alice's resend: reason 0x%02x, %v, %v; want 0x00, the duplicate of seq 1", again.ReasonCode, again.Properties.User, err)
	}
	if ev := nextEvent(t, bob, "message.new", 5*time.Second); ev.ClientMsgID != id || ev.Seq != 1 {
		t.Errorf("bob got %+v, want alice's message at seq 1", ev)
	}
	noMessagesOf(t, bob, conv.ID, 300*time.Millisecond, "a second copy of alice's message")
}
