package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// A member added to a group whose history is "joined" (the default) reads
// nothing from before their join: the new body an edit gives an earlier
// message reaches them empty, by every path (live, the recent cache,
// PostgreSQL), as history shows it them; older members get the body.

// entry returns the event of conv's entry seq that c received.
func (c *fakeConn) entry(conv, seq int64) (chat.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.got {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.IsEntry() && ev.ConversationID == conv && ev.Seq == seq {
			return ev, true
		}
	}
	return chat.Event{}, false
}

// waitEntry waits until c received conv's entry seq and returns it.
func waitEntry(t *testing.T, c *fakeConn, conv, seq int64) chat.Event {
	t.Helper()
	var ev chat.Event
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("session %s to receive entry %d of conversation %d", c.id, seq, conv),
		func() (ok bool) { ev, ok = c.entry(conv, seq); return ok })
	return ev
}

func body(ev chat.Event) string {
	if ev.Body == nil {
		return "<none>"
	}
	return *ev.Body
}

// join adds user to f.conv and publishes what the store publishes for it:
// member.added (at the join's seq) and the entry announcing it, which it
// returns.
func join(t *testing.T, h *delivery.Hub, f fixture, user int64) chat.Event {
	t.Helper()
	evs := joinEvents(t, f, user)
	h.Publish(evs...)
	return evs[1]
}

// joinEvents adds user to f.conv and returns what the store publishes for
// it, unpublished: member.added (at the join's seq), then the entry
// announcing it.
func joinEvents(t *testing.T, f fixture, user int64) []chat.Event {
	t.Helper()
	ctx := context.Background()
	if _, _, err := f.svc.AddMember(ctx, f.conv.ID, 1, user); err != nil {
		t.Fatal(err)
	}
	conv, err := f.svc.GetConversation(ctx, f.conv.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.sessions.SinceMany(ctx, 1, []chat.Range{{ConversationID: f.conv.ID, After: conv.LastSeq - 1}}, 1)
	if err != nil || len(got[f.conv.ID]) != 1 {
		t.Fatalf("read the join's entry: %v, %v", got, err)
	}
	announce := chat.EntryEvent(got[f.conv.ID][0])
	conv.LastSeq = announce.Seq - 1 // the join's seq, as the store publishes it
	return []chat.Event{chat.MemberAddedEvent(conv, user, 1, chat.RoleMember), announce}
}

// editAs has sender edit message target of f.conv to text.
func editAs(t *testing.T, f fixture, sender, target int64, text string) chat.Event {
	t.Helper()
	res, err := f.svc.Edit(context.Background(), chat.EditRequest{ConversationID: f.conv.ID, UserID: sender, TargetSeq: target,
		ClientMsgID: uuid.NewString(), Body: text})
	if err != nil {
		t.Fatal(err)
	}
	return chat.EntryEvent(res.Entry)
}

func TestALateMemberCatchingUpFromTheRecentCacheGetsAnEditOfAMessageFromBeforeTheirJoinWithoutItsBody(t *testing.T) {
	f := setup(t)
	h := startHub(t, f.sessions, delivery.Options{})
	// User 3's persistent session exists before the join: when it comes
	// back it is behind, from its join on.
	if _, err := f.sessions.Open(context.Background(), "u3", "", 3, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	old := attach(t, h, f, "u2", false, true)
	secret := sendAs(t, f, f.conv.ID, 1)
	h.Publish(secret)
	join(t, h, f, 3)
	ed := editAs(t, f, 1, secret.Seq, "edited secret")
	h.Publish(ed) // the recent cache holds it now
	if got := body(waitEntry(t, old, f.conv.ID, ed.Seq)); got != "edited secret" {
		t.Fatalf("founder 2 got the edit with body %q, want %q", got, "edited secret")
	}

	late := attachUser(t, h, f, "u3", 3, true, true, true)
	if got := body(waitEntry(t, late, f.conv.ID, ed.Seq)); got != "" {
		t.Fatalf("user 3, added after seq %d, caught up on its edit with body %q, want it empty (history_visible=joined)", secret.Seq, got)
	}
}

func TestALiveEditOfAMessageFromBeforeALateMembersJoinReachesThemWithoutItsBody(t *testing.T) {
	testLiveEdit(t, chat.HistoryJoined, 0, "")
}

// Slim payloads (past LargeGroup members) keep an edit's body: the same
// rule applies.
func TestALiveEditOfAMessageFromBeforeALateMembersJoinReachesThemWithoutItsBodyInALargeGroup(t *testing.T) {
	testLiveEdit(t, chat.HistoryJoined, 1, "")
}

// No over-hiding: with the whole history open, the late member reads
// the edit as every member does.
func TestALiveEditReachesALateMemberWithItsBodyWhenTheGroupsHistoryIsAll(t *testing.T) {
	testLiveEdit(t, chat.HistoryAll, 0, "edited secret")
}

func testLiveEdit(t *testing.T, history string, largeGroup int, want string) {
	f := setup(t)
	ctx := context.Background()
	if _, err := f.svc.UpdateGroup(ctx, f.conv.ID, 1, chat.GroupUpdate{HistoryVisible: &history}); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, f.sessions, delivery.Options{LargeGroup: largeGroup})
	old := attach(t, h, f, "u2", false, true)
	late := attachUser(t, h, f, "u3", 3, false, true, true)
	secret := sendAs(t, f, f.conv.ID, 1)
	h.Publish(secret) // the member index holds users 1 and 2 now
	waitEntry(t, old, f.conv.ID, secret.Seq)
	announce := join(t, h, f, 3)
	waitEntry(t, late, f.conv.ID, announce.Seq) // user 3's stream is live

	ed := editAs(t, f, 1, secret.Seq, "edited secret")
	h.Publish(ed)
	if got := body(waitEntry(t, old, f.conv.ID, ed.Seq)); got != "edited secret" {
		t.Fatalf("founder 2 got the edit with body %q, want %q", got, "edited secret")
	}
	if got := body(waitEntry(t, late, f.conv.ID, ed.Seq)); got != want {
		t.Fatalf("user 3, added after seq %d (history %s), got its edit with body %q, want %q", secret.Seq, history, got, want)
	}
}

// setHistory has the owner (user 1) set f.conv's history visibility to v
// and returns the conversation.updated the store publishes for it,
// unpublished.
func setHistory(t *testing.T, f fixture, v string) chat.Event {
	t.Helper()
	conv, err := f.svc.UpdateGroup(context.Background(), f.conv.ID, 1, chat.GroupUpdate{HistoryVisible: &v})
	if err != nil {
		t.Fatal(err)
	}
	return chat.ConversationUpdatedEvent(conv, 1, conv.LastSeq)
}

// Closing the history while the fan-out knows the members: the late
// member's next edit of an earlier message reaches them without its body.
func TestALiveEditAfterTheOwnerClosesTheHistoryReachesALateMemberWithoutItsBody(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	setHistory(t, f, chat.HistoryAll)
	h := startHub(t, f.sessions, delivery.Options{})
	late := attachUser(t, h, f, "u3", 3, false, true, true)
	secret := sendAs(t, f, f.conv.ID, 1)
	h.Publish(secret)
	announce := join(t, h, f, 3)
	waitEntry(t, late, f.conv.ID, announce.Seq)
	ed := editAs(t, f, 1, secret.Seq, "open")
	h.Publish(ed) // routed with user 3's floor 0
	if got := body(waitEntry(t, late, f.conv.ID, ed.Seq)); got != "open" {
		t.Fatalf("history all: user 3 got the edit with body %q, want %q", got, "open")
	}

	updated := setHistory(t, f, chat.HistoryJoined) // published as the store does: its entry, then the event
	got, err := f.sessions.SinceMany(ctx, 1, []chat.Range{{ConversationID: f.conv.ID, After: updated.Seq - 1}}, 1)
	if err != nil || len(got[f.conv.ID]) != 1 {
		t.Fatalf("read the settings change's entry: %v, %v", got, err)
	}
	h.Publish(chat.EntryEvent(got[f.conv.ID][0]))
	h.Publish(updated)
	ed = editAs(t, f, 1, secret.Seq, "closed")
	h.Publish(ed)
	if got := body(waitEntry(t, late, f.conv.ID, ed.Seq)); got != "" {
		t.Fatalf("history joined again: user 3, added after seq %d, got its edit with body %q, want it empty", secret.Seq, got)
	}
}
