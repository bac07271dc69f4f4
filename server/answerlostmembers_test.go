package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
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

	removal, reachable := commitAnswerLostOutcomeNotLearnt(t, srv, proxy, "DELETE FROM conversation_member WHERE conversation_id", "removal", "DELETE", fmt.Sprintf("/v1/conversations/%d/members/2", conv.ID), nil)
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
	srv, proxy, conv, bob, carol := teamOfAliceAndBobWithCarolOnline(t)

	add, reachable := commitAnswerLostOutcomeNotLearnt(t, srv, proxy, "INSERT INTO conversation_member", "add", "POST", fmt.Sprintf("/v1/conversations/%d/members", conv.ID), map[string]any{"userId": 3})
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

// TestASettingsChangeWhoseOutcomeWasNotLearntHidesEditsLiveAsHistoryDoes:
// carol joined a group whose history was visible to all; alice makes it
// visible only from each member's join, the change committed, the answer
// to its COMMIT was lost, and the node cannot learn what became of it
// (503). Alice then edits a message from before carol's join, twice:
// carol, online on the node, gets both edits without their body, as
// history shows them her. Before, the first came from PostgreSQL (the
// settings change's entry, never published, was a gap in her stream) and
// hid it, but the second came live with its body: the node's member index
// kept carol's floor from before the change.
func TestASettingsChangeWhoseOutcomeWasNotLearntHidesEditsLiveAsHistoryDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, proxy, conv, path, secret, carol := carolJoinedAGroupWhoseHistoryWasVisibleToAll(t)

	change, reachable := commitAnswerLostOutcomeNotLearnt(t, srv, proxy, "history_visible = $6", "settings change", "PATCH", path, map[string]any{"historyVisible": "joined"})
	defer reachable()
	if change.status != 503 {
		t.Fatalf("the settings change whose outcome was not learnt: %d %s, want 503", change.status, change.body)
	}
	if v := pgtest.QueryOne[string](t, srv.Pool, `SELECT history_visible FROM conversation WHERE id = $1`, conv.ID); v != "joined" {
		t.Fatalf("history_visible is %q: the change did not commit", v)
	}

	twoEditsHiddenFromCarol(t, ctx, srv, conv, secret, carol)
}

// TestASettingsChangeWhoseCommitAnswerIsLateHidesEditsLiveMeanwhile: alice
// makes a group's history visible only from each member's join; the
// change committed, but its answer has not come back yet (the connection
// hangs before it dies, as on a network failure). Meanwhile alice edits a
// message from before carol's join, twice: carol, online on the node,
// gets both edits without their body, as history shows them her. Before,
// the group was unsettled only once pg_xact_status had failed for 5 s
// after the answer was lost: the first edit came from PostgreSQL (the
// change's entry, not published yet, was a gap in her stream) and hid its
// body, but the second came live with the floors the member index held
// before the change.
func TestASettingsChangeWhoseCommitAnswerIsLateHidesEditsLiveMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, proxy, conv, path, secret, carol := carolJoinedAGroupWhoseHistoryWasVisibleToAll(t)

	committed, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	cut := proxy.LoseAnswer("history_visible = $6", func() {
		close(committed)
		<-release
	})
	changed := make(chan httpReply, 1)
	go func() { changed <- httpDo(t, srv, 1, "PATCH", path, map[string]any{"historyVisible": "joined"}) }()
	select {
	case <-committed:
	case <-time.After(5 * time.Second):
		t.Fatal("the settings change did not commit")
	}

	twoEditsHiddenFromCarol(t, ctx, srv, conv, secret, carol)
	releaseOnce.Do(func() { close(release) })
	<-cut
	<-changed
}

// carolJoinedAGroupWhoseHistoryWasVisibleToAll is a node whose database
// connections go through proxy and a group "team" of alice (1) and bob
// (2) on it, its history made visible to all (path is the group's); alice
// sent secret, then added carol (3), who is connected over MQTT 5 and has
// got alice's "hello carol": the node routes the group's messages to
// carol already.
func carolJoinedAGroupWhoseHistoryWasVisibleToAll(t *testing.T) (*server.Server, *pgtest.AnswerLosing, chat.Conversation, string, chat.SendResult, *mqtttest.Client) {
	t.Helper()
	srv, proxy := answerLosingNode(t, nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "team", []int64{2})
	path := fmt.Sprintf("/v1/conversations/%d", conv.ID)
	if r := httpDo(t, srv, 1, "PATCH", path, map[string]any{"historyVisible": "all"}); r.status != 200 {
		t.Fatalf("history visible to all: %d %s", r.status, r.body)
	}
	secret, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "before carol"})
	if err != nil {
		t.Fatal(err)
	}
	if r := httpDo(t, srv, 1, "POST", path+"/members", map[string]any{"userId": 3}); r.status != 201 {
		t.Fatalf("add carol: %d %s", r.status, r.body)
	}
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol", 5, true)
	mustSendAs(t, srv, conv.ID, 1, "hello carol")
	nextEvent(t, carol, "message.new", 5*time.Second)
	return srv, proxy, conv, path, secret, carol
}

// commitAnswerLostOutcomeNotLearnt: alice (1) sends the request (method,
// path, body) whose change (its statement holds query) commits; the
// answer to its COMMIT is lost (within 5 s, else the test fails naming
// what), and so is every pg_xact_status after it until reachable is
// called: the node cannot learn what became of the change.
func commitAnswerLostOutcomeNotLearnt(t *testing.T, srv *server.Server, proxy *pgtest.AnswerLosing, query, what, method, path string, body any) (reply httpReply, reachable func()) {
	t.Helper()
	cut := proxy.LoseAnswer(query, func() { reachable = proxy.LoseAnswers("pg_xact_status") })
	reply = httpDo(t, srv, 1, method, path, body)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the " + what + "'s COMMIT was not lost")
	}
	return reply, reachable
}

// twoEditsHiddenFromCarol: alice (1) edits secret, from before carol's
// join, twice; carol gets each edit live (within 5 s) without its body,
// as history shows them her.
func twoEditsHiddenFromCarol(t *testing.T, ctx context.Context, srv *server.Server, conv chat.Conversation, secret chat.SendResult, carol *mqtttest.Client) {
	t.Helper()
	for i, body := range []string{"first edit", "second edit"} {
		if _, err := srv.Service.Edit(ctx, chat.EditRequest{ConversationID: conv.ID, UserID: 1, ClientMsgID: newID(),
			TargetSeq: secret.Message.Seq, Body: body}); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, carol, "message.edited", 5*time.Second); ev.Body != "" {
			t.Errorf("carol got edit %d of a message from before her join with its body %q, want it hidden (history is visible from her join)", i+1, ev.Body)
		}
	}
}
