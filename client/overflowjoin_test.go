package client_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// Window and queue of the node in these tests: a few events fill them.
const (
	overflowWindow = 4
	overflowQueue  = 16
)

// TestAGroupJoinedWhileTheSessionOverflowsIsTracked: a chatd session
// whose client does not read for a while drops the live events past its
// queue and catches up from PostgreSQL (internal/delivery), so a user
// added to a group meanwhile gets the group's entries from the join on
// but never its member.added. The client must track the group all the
// same, from the add's system entry on: Positions moves with what it hands
// on, and a message lost on the way after that is filled from history.
// So whether the user was never in the group before in this run, left it
// live (a member.removed marked it gone with the seq its leave owed
// entries up to), or left it while offline (the catch-up's inbox, which
// no longer listed it, marked it gone with no such seq), on a persistent
// session and on an ephemeral one.
func TestAGroupJoinedWhileTheSessionOverflowsIsTracked(t *testing.T) {
	t.Parallel()
	for _, persistent := range []bool{true, false} {
		for _, before := range []string{"never a member", "left live", "left while offline"} {
			name := before
			if persistent {
				name += ", persistent"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				joinedDuringAnOverflow(t, persistent, before)
			})
		}
	}
}

// joinedDuringAnOverflow runs TestAGroupJoinedWhileTheSessionOverflowsIsTracked
// for user 2 whose membership of the group before the add is before.
func joinedDuringAnOverflow(t *testing.T, persistent bool, before string) {
	env := testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_INFLIGHT": "4"})
	srv := testnode.Start(t, env, nil, server.WithDeliveryQueueSize(overflowQueue))
	a := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	busy := direct(t, a, 2)
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	if persistent {
		cfg.SessionDir = t.TempDir()
	}
	b := connect(t, cfg)
	ctx := ctxFor(t, 60*time.Second)

	var members []int64
	if before != "never a member" {
		members = []int64{2}
	}
	g, err := a.CreateGroup(ctx, before, members)
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 2, "before") // seqs 1, 2
	if before != "never a member" {
		messages(t, b, g.ID, 2, 10*time.Second)
	}
	switch before {
	case "left live":
		if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
			t.Fatal(err)
		}
		nextEvent(t, b, client.EventMemberRemoved, 10*time.Second)
	case "left while offline":
		removeWhileOffline(t, ctx, a, b, px, g.ID)
	}

	// b reads nothing (the first event it gets holds its connection's
	// reader) while user 1 writes more into their direct conversation
	// than b's session has room for, then adds user 2 and writes on.
	held, release := make(chan struct{}, 1), make(chan struct{})
	b.DropEvents(func([]byte) bool {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
		return false
	})
	sendN(t, a, busy, 2*(overflowWindow+overflowQueue), "busy")
	testkit.Receive(t, held, 10*time.Second, "no event reached user 2 within 10s")
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	after := sendN(t, a, g.ID, 2, "after the add")
	// The fan-out routes the group's events in order, the add's (which
	// wait for the group's members to be read) before these: once user
	// 1 has the last, user 2's session was offered the member.added, and
	// takes it before any PUBACK that b sends from now on.
	if !watchEvents(t, a, 10*time.Second, func(ev client.Event) bool {
		return ev.Type == client.EventMessageNew && ev.ConversationID == g.ID && ev.Seq == after[1]
	}) {
		t.Fatalf("user 1 did not get their message %d within 10s", after[1])
	}
	b.DropEvents(nil)
	close(release)

	var seqs []int64
	added := false
	if !watchEvents(t, b, 15*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != g.ID {
			return false
		}
		if ev.Type == client.EventMemberAdded && ev.UserID == 2 {
			added = true
		}
		if ev.Seq == 0 || ev.Type != client.EventMessageNew && ev.Type != client.EventSystemNew {
			return false
		}
		if len(seqs) > 0 && ev.Seq != seqs[len(seqs)-1]+1 {
			t.Fatalf("entry %d of the group after %d: a gap or a repeat", ev.Seq, seqs[len(seqs)-1])
		}
		seqs = append(seqs, ev.Seq)
		return ev.Seq == after[1]
	}) {
		t.Fatalf("entries of the group %v within 15s, want up to %d", seqs, after[1])
	}
	if added {
		t.Fatal("the member.added of user 2 reached the client: the session did not drop it, nothing was tested")
	}
	if h, ok := b.Positions()[g.ID]; !ok || h != after[1] {
		t.Fatalf("the group in Positions: %d %v, want tracked at %d", h, ok, after[1])
	}

	// Tracked: a message lost on the way is a gap, filled from history.
	dropMessages(b, after[1]+1, after[1]+1)
	more := sendN(t, a, g.ID, 2, "more")
	if m := messages(t, b, g.ID, 2, 10*time.Second); m[0].Seq != more[0] || m[1].Seq != more[1] || !m[0].FromHistory {
		t.Fatalf("messages after the lost one: %d (from history: %v), %d; want %d from history, %d",
			m[0].Seq, m[0].FromHistory, m[1].Seq, more[0], more[1])
	}
	if h := b.Positions()[g.ID]; h != more[1] {
		t.Fatalf("the group in Positions at %d, want %d", h, more[1])
	}
}

// TestAJoinEntryOwedByALeaveDoesNotBringTheConversationBack: the system
// entry of the user's own member.added tracks a conversation the catch-up
// found them gone from again (the member.added event may have been
// dropped), but one that a live member.removed still owed (its seq at or
// before the removal's) is of the membership that ended: handed on, and
// the conversation stays out of Positions.
func TestAJoinEntryOwedByALeaveDoesNotBringTheConversationBack(t *testing.T) {
	t.Parallel()
	b := connect(t, testConfig(t, newBroker(t), 2))
	const conv = 999 // no such conversation: nothing here asks chatd
	b.InjectEvent([]byte(`{"type":"message.new","conversationId":999,"seq":1,"senderId":1,"clientMsgId":"m1","body":"m","createdAt":"2026-01-01T00:00:00Z"}`))
	b.InjectEvent([]byte(`{"type":"member.removed","conversationId":999,"userId":2,"actorId":1,"seq":5}`))
	// Added at 2 (the member.added entry at 3), removed at 5: what the
	// removal owed reaches the client after its member.removed.
	b.InjectEvent([]byte(`{"type":"system.new","conversationId":999,"seq":3,"actorId":1,"clientMsgId":"s3","createdAt":"2026-01-01T00:00:00Z","action":"member.added","userId":2,"role":"member"}`))
	b.InjectEvent([]byte(`{"type":"typing","conversationId":1,"userId":1}`))
	handed := false
	if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == conv && ev.Seq == 3 {
			handed = true
		}
		return ev.Type == client.EventTyping
	}) {
		t.Fatal("the typing event after the owed entry did not come within 10s")
	}
	if !handed {
		t.Fatal("the owed member.added entry was not handed on")
	}
	if h, ok := b.Positions()[conv]; ok {
		t.Fatalf("the conversation is back in Positions (at %d) after an entry its leave owed", h)
	}
}

// TestAJoinEntryOfAMembershipThatEndedOfflineDoesNotBringTheConversationBack:
// a persistent session offline while the user is removed from a group,
// added back and removed again is owed the entries of that second
// membership, its own member.added entry first (store.oweUntilLeave),
// and the catch-up's inbox, which does not list the group, marks it
// gone with no seq telling where those entries end. When the replay
// comes after that inbox (a slow reader, a long replay), the member.added
// entry is of a membership that ended: handed on, the group must stay
// out of Positions, as the entries a live member.removed owed do.
func TestAJoinEntryOfAMembershipThatEndedOfflineDoesNotBringTheConversationBack(t *testing.T) {
	t.Parallel()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), nil), nil)
	a := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	cfg.SessionDir = t.TempDir()
	b := connect(t, cfg)
	ctx := ctxFor(t, 60*time.Second)

	g, err := a.CreateGroup(ctx, "twice", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 2, "before")
	messages(t, b, g.ID, 2, 10*time.Second)

	px.Cut()
	testkit.WaitFor(t, 10*time.Second, "user 2 to go offline", func() bool { return !b.Connected() })
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	owed := sendN(t, a, g.ID, 1, "owed")
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}

	// The group's events that reach b from now on are held back (as a
	// slow reader would) until the catch-up has found it gone, then
	// handed to the dispatcher in the order they came.
	var (
		mu   sync.Mutex
		late [][]byte
	)
	b.DropEvents(func(p []byte) bool {
		var ev struct {
			ConversationID int64 `json:"conversationId"`
		}
		if json.Unmarshal(p, &ev) != nil || ev.ConversationID != g.ID {
			return false
		}
		mu.Lock()
		late = append(late, append([]byte(nil), p...))
		mu.Unlock()
		return true
	})
	px.Resume()
	testkit.WaitFor(t, 15*time.Second, "the group to leave user 2's positions", func() bool {
		_, ok := b.Positions()[g.ID]
		return !ok
	})
	testkit.WaitFor(t, 15*time.Second, "the replay of the entries the second membership owed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(late, func(p []byte) bool { return bytes.Contains(p, []byte(`"seq":`+strconv.FormatInt(owed[0], 10)+`,`)) })
	})
	b.DropEvents(nil)
	mu.Lock()
	joinEntry := false
	for _, p := range late {
		joinEntry = joinEntry || bytes.Contains(p, []byte(`"action":"member.added"`))
		b.InjectEvent(p)
	}
	mu.Unlock()
	if !joinEntry {
		t.Fatal("the replay held back had no member.added entry: nothing was tested")
	}
	if !watchEvents(t, b, 10*time.Second, func(ev client.Event) bool {
		return ev.ConversationID == g.ID && ev.Seq == owed[0]
	}) {
		t.Fatalf("the owed entry %d was not handed on within 10s", owed[0])
	}
	if h, ok := b.Positions()[g.ID]; ok {
		t.Fatalf("the group is back in Positions (at %d) after the entries of a membership that ended offline", h)
	}
}
