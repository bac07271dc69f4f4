package client_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// holdCatchUp holds c's next catch-up after a reconnection (it cuts the
// connection itself) while its inbox is being read: the inbox request
// has gone out, its reply is not read yet. It returns once the read is
// held; release lets it go on, and done is closed once the catch-up has
// applied the inbox read. The hook is the package's, so tests that use
// it do not call t.Parallel.
func holdCatchUp(t *testing.T, c *client.Client) (release func(), done <-chan struct{}) {
	t.Helper()
	held := make(chan struct{})
	let := make(chan struct{})
	var once sync.Once
	client.SetReplyWaitHook(func(method string, connDone <-chan struct{}) {
		if method != "inbox" {
			return
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(held)
		select {
		case <-let:
		case <-connDone:
		}
	})
	t.Cleanup(func() { client.SetReplyWaitHook(nil) })
	applied := make(chan struct{})
	var appliedOnce sync.Once
	c.OnCatchUp(func() { appliedOnce.Do(func() { close(applied) }) })
	t.Cleanup(func() { c.OnCatchUp(nil) })

	c.TerminateConnection()
	testkit.Receive(t, held, 15*time.Second, "no catch-up read the inbox within 15s of the reconnection")
	var releaseOnce sync.Once
	return func() { releaseOnce.Do(func() { close(let) }) }, applied
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	testkit.Receive(t, ch, 15*time.Second, fmt.Sprintf("%s: not within 15s", what))
}

// TestAnInboxReadBeforeALiveRemovalDoesNotBringTheConversationBack: a
// persistent session's catch-up reads the inbox beside the events. A
// member.removed of the user that arrives while that read is under way
// is newer than the read, which still lists the conversation: the read
// must not end what the removal did (the conversation dropped from
// Positions, what the leave owed handed on without tracking it again).
func TestAnInboxReadBeforeALiveRemovalDoesNotBringTheConversationBack(t *testing.T) {
	_, broker, a, _ := sender(t)
	ctx := ctxFor(t, 30*time.Second)
	g, err := a.CreateGroup(ctx, "removed during the catch-up", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, broker, 2)
	cfg.SessionDir = t.TempDir()
	b := connect(t, cfg)
	sendN(t, a, g.ID, 1, "m") // seq 1
	messages(t, b, g.ID, 1, 10*time.Second)

	release, applied := holdCatchUp(t, b)
	defer release()
	// The removal, live, while the inbox (read before it) is on its way;
	// it owes entry 2 (its seq: the last one when it was made).
	b.InjectEvent(fmt.Appendf(nil, `{"type":"member.removed","conversationId":%d,"userId":2,"actorId":1,"seq":2}`, g.ID))
	testkit.WaitFor(t, 10*time.Second, "member.removed to drop the group from Positions", func() bool {
		_, ok := b.Positions()[g.ID]
		return !ok
	})
	release()
	waitClosed(t, applied, "the catch-up to apply its inbox read")

	// What the leave owed, after the catch-up: handed on, not tracked.
	handOwedEntry(t, b, g.ID, 2)
	if h, ok := b.Positions()[g.ID]; ok {
		t.Fatalf("the group is back in Positions (at %d): an inbox read from before the live member.removed ended it", h)
	}
}

// TestAnInboxReadBeforeALiveReAddDoesNotForgetTheConversation: the user
// was removed from a group (chatd keeps them removed throughout: the
// re-adds here are injected as live events), and is added back, a live
// member.added then a message, while the catch-up reads the inbox. The
// read, which does not list the group, is older than the re-add: the
// group, tracked again from its message, must stay in Positions.
func TestAnInboxReadBeforeALiveReAddDoesNotForgetTheConversation(t *testing.T) {
	srv, _, a, _ := sender(t)
	g, b, _ := removedWhileOffline(t, srv, a, "re-added during the catch-up")
	// b tracks the group again from a message after a re-add.
	b.InjectEvent(fmt.Appendf(nil, `{"type":"member.added","conversationId":%d,"conversationType":"GROUP","title":"g","userId":2,"actorId":1,"role":"member"}`, g.ID))
	b.InjectEvent(fmt.Appendf(nil, `{"type":"message.new","conversationId":%d,"seq":5,"senderId":1,"clientMsgId":%q,"body":"back","createdAt":"2026-01-01T00:00:00Z"}`,
		g.ID, uuid.NewString()))
	testkit.WaitFor(t, 10*time.Second, "the group to be tracked again", func() bool {
		return b.Positions()[g.ID] == 5
	})

	// This time the re-add comes while the next catch-up's inbox read
	// (which does not list the group) is on its way.
	release, applied := holdCatchUp(t, b)
	defer release()
	b.InjectEvent(fmt.Appendf(nil, `{"type":"member.added","conversationId":%d,"conversationType":"GROUP","title":"g","userId":2,"actorId":1,"role":"member"}`, g.ID))
	b.InjectEvent(fmt.Appendf(nil, `{"type":"message.new","conversationId":%d,"seq":6,"senderId":1,"clientMsgId":%q,"body":"back again","createdAt":"2026-01-01T00:00:00Z"}`,
		g.ID, uuid.NewString()))
	testkit.WaitFor(t, 10*time.Second, "the group at the message after the re-add", func() bool {
		return b.Positions()[g.ID] == 6
	})
	release()
	waitClosed(t, applied, "the catch-up to apply its inbox read")
	if h, ok := b.Positions()[g.ID]; !ok || h != 6 {
		t.Fatalf("the group in Positions: %d %v after the catch-up, want 6: an inbox read from before the live re-add forgot it", h, ok)
	}
}
