package delivery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
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
	eventually(t, 10*time.Second, func() (ok bool) { ev, ok = c.entry(conv, seq); return ok },
		"session %s never received entry %d of conversation %d", c.id, seq, conv)
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
	h.Publish(chat.MemberAddedEvent(conv, user, 1, chat.RoleMember))
	h.Publish(announce)
	return announce
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
	if _, err := f.sessions.Open(context.Background(), "u3", 3, true, false, time.Hour); err != nil {
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
