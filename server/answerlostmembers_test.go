package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// TestAMemberRemovedByAChangeWhoseOutcomeWasNotLearntGetsNoLaterMessageLive:
// alice removes bob from a group; the removal committed, the answer to
// its COMMIT was lost with the connection, and the node cannot learn what
// became of it (PostgreSQL does not answer the question): alice is told
// to retry (503) and nothing is published. Alice then writes to the
// group: bob, online on the same node, does not get it live, and once
// PostgreSQL answers again he gets his member.removed. Before, the
// node's member index still listed bob, who got every message of the
// group live until he reconnected.
func TestAMemberRemovedByAChangeWhoseOutcomeWasNotLearntGetsNoLaterMessageLive(t *testing.T) {
	t.Parallel()
	srv, proxy := answerLosingNode(t, nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "team", []int64{2, 3})
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol", 5, true)
	// The node routes the group's messages already: its members are
	// loaded, as on a busy node.
	mustSendAs(t, srv, conv.ID, 1, "before")
	nextEvent(t, bob, "message.new", 5*time.Second)
	nextEvent(t, carol, "message.new", 5*time.Second)

	var reachable func()
	cut := proxy.LoseAnswer("DELETE FROM conversation_member WHERE conversation_id", func() { reachable = proxy.LoseAnswers("pg_xact_status") })
	removal := httpDo(t, srv, 1, "DELETE", fmt.Sprintf("/v1/conversations/%d/members/2", conv.ID), nil)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the removal's COMMIT was not lost")
	}
	defer reachable()
	if removal.status != 503 {
		t.Fatalf("the removal whose outcome was not learnt: %d %s, want 503", removal.status, removal.body)
	}
	if n := pgtest.QueryOne[int64](t, srv.Pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv.ID); n != 0 {
		t.Fatalf("bob is still a member: the removal did not commit")
	}

	mustSendAs(t, srv, conv.ID, 1, "after bob left")
	if ev := nextEvent(t, carol, "message.new", 5*time.Second); ev.Body != "after bob left" {
		t.Errorf("carol got %+v, want alice's message sent after the removal", ev)
	}
	noMessagesOf(t, bob, conv.ID, time.Second, "alice's message sent after his removal committed")

	reachable()
	if ev := nextEvent(t, bob, "member.removed", 10*time.Second); ev.ConversationID != conv.ID || ev.UserID != 2 {
		t.Errorf("bob got %+v, want his member.removed from the group", ev)
	}
	mustSendAs(t, srv, conv.ID, 1, "later")
	noMessagesOf(t, bob, conv.ID, 500*time.Millisecond, "alice's later message")
}

// TestAMemberAddedByAChangeWhoseOutcomeWasNotLearntGetsLaterMessagesLive:
// alice adds carol to a group; the add committed, the answer to its
// COMMIT was lost, and the node cannot learn what became of it: alice is
// told to retry (503). Alice's next message reaches carol, online on the
// node, live, and once PostgreSQL answers again bob gets the
// member.added. Before, the node's member index never learnt of carol,
// who got nothing of the group live until she reconnected.
func TestAMemberAddedByAChangeWhoseOutcomeWasNotLearntGetsLaterMessagesLive(t *testing.T) {
	t.Parallel()
	srv, proxy := answerLosingNode(t, nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "team", []int64{2})
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol", 5, true)
	mustSendAs(t, srv, conv.ID, 1, "before carol")
	nextEvent(t, bob, "message.new", 5*time.Second)

	var reachable func()
	cut := proxy.LoseAnswer("INSERT INTO conversation_member", func() { reachable = proxy.LoseAnswers("pg_xact_status") })
	add := httpDo(t, srv, 1, "POST", fmt.Sprintf("/v1/conversations/%d/members", conv.ID), map[string]any{"userId": 3})
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the add's COMMIT was not lost")
	}
	defer reachable()
	if add.status != 503 {
		t.Fatalf("the add whose outcome was not learnt: %d %s, want 503", add.status, add.body)
	}

	mustSendAs(t, srv, conv.ID, 1, "hello carol")
	if ev := nextEvent(t, carol, "message.new", 5*time.Second); ev.Body != "hello carol" || ev.Seq != 3 {
		t.Errorf("carol got %+v, want alice's message at seq 3", ev)
	}

	reachable()
	if ev := nextEvent(t, bob, "member.added", 10*time.Second); ev.ConversationID != conv.ID || ev.UserID != 3 {
		t.Errorf("bob got %+v, want carol's member.added", ev)
	}
}
