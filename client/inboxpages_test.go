package client_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestAConversationThatMovesAheadDuringTheCatchUpsInboxReadIsNotLost: the
// catch-up reads the inbox page by page (200 a page, most recent activity
// first), and a conversation written to between two pages moves to the
// first, already read: no page lists it. It is no conversation the user
// left, though: it must stay tracked, and what it missed while the
// client was offline (a reaction, which leaves its place in the inbox)
// must still come.
func TestAConversationThatMovesAheadDuringTheCatchUpsInboxReadIsNotLost(t *testing.T) {
	t.Parallel()
	srv, _ := nodeOn(t, pgtest.NewDB(t))
	ctx := ctxFor(t, 60*time.Second)
	send := func(conv int64, body string) int64 {
		t.Helper()
		res, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv, SenderID: 1, ClientMsgID: uuid.NewString(), Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return res.Message.Seq
	}
	x := groupOf12(t, srv)
	send(x.ID, "tracked") // seq 1
	for range 200 {       // newer: x is on the inbox's second page
		groupOf12(t, srv)
	}

	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2) // ephemeral: nothing is replayed
	cfg.Positions = map[int64]int64{x.ID: 1}
	b := connect(t, cfg)
	cutOff(t, px, b)
	// Missed while offline: a reaction, which leaves the group's place in
	// the inbox (its last message) where it was.
	if _, err := srv.Service.React(ctx, chat.ReactionRequest{ConversationID: x.ID, UserID: 1, TargetSeq: 1,
		ClientMsgID: uuid.NewString(), Emoji: "👍", On: true}); err != nil { // seq 2
		t.Fatal(err)
	}

	// x is written to right after the catch-up read the first page.
	var moved atomic.Bool
	b.DropReplies(func(p []byte) bool {
		var page struct {
			Conversations []json.RawMessage `json:"conversations"`
			NextCursor    string            `json:"nextCursor"`
		}
		if json.Unmarshal(p, &page) == nil && page.NextCursor != "" && len(page.Conversations) == 200 && moved.CompareAndSwap(false, true) {
			send(x.ID, "during the inbox read") // seq 3
		}
		return false
	})
	px.Resume()
	var got []int64
	if !watchEvents(t, b, 20*time.Second, func(ev client.Event) bool {
		if (ev.Type == client.EventMessageNew || ev.Type == client.EventReactionUpdated) && ev.ConversationID == x.ID {
			got = append(got, ev.Seq)
		}
		return len(got) == 2
	}) {
		t.Fatalf("got seqs %v of the group within 20s (moved between pages: %v), want 2 (the reaction) and 3; positions %v",
			got, moved.Load(), b.Positions())
	}
	if !moved.Load() {
		t.Fatal("the group was not written to during the inbox read")
	}
	if got[0] != 2 || got[1] != 3 {
		t.Fatalf("the group's seqs %v, want [2 3]: what it missed offline was lost", got)
	}
	if h := b.Positions()[x.ID]; h != 3 {
		t.Fatalf("the group at %d in Positions, want 3", h)
	}
}
