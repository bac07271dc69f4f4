package client_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/server"
)

// A conversation of user 2 that the client has no position in, on the
// second page of their inbox, gets a message right after the catch-up
// read the first: it moves ahead of the pages read and no page lists it.
// The catch-up's inbox read must list it all the same:
//   - joined while offline (so no event told it) and written to then:
//     what was written since the join is handed on, before the message
//     that moved it;
//   - there before the client started, with that message's event lost
//     (as with a connection that drops right after the read): it is the
//     user's after its lastSeq at the read, so the next catch-up hands on
//     what came after it, nothing from before the client started.
func TestAnUntrackedConversationWrittenToWhileTheInboxIsPagedIsListedByTheRead(t *testing.T) {
	t.Parallel()
	t.Run("joined while offline", func(t *testing.T) {
		srv, _, a, direct := sender(t)
		px := newProxy(t, srv.MQTTAddr())
		b := connect(t, testConfig(t, px.URL(), 2))
		sendN(t, a, direct, 1, "before going offline") // its catch-up is done
		messages(t, b, direct, 1, 10*time.Second)

		cutOff(t, px, b)
		y, err := a.CreateGroup(ctxFor(t, 10*time.Second), "y", []int64{2})
		if err != nil {
			t.Fatal(err)
		}
		want := sendN(t, a, y.ID, 3, "while offline")
		moved := moveDuringInboxRead(t, srv, b, y.ID)
		px.Resume()
		want = append(want, 4) // the message that moved it
		handedOnOnce(t, b, y.ID, want)
		if !moved.Load() {
			t.Fatal("the group was not written to during the inbox read")
		}
	})
	t.Run("there before the client started, its entry lost", func(t *testing.T) {
		srv, _, a, direct := sender(t)
		y, err := a.CreateGroup(ctxFor(t, 10*time.Second), "y", []int64{2})
		if err != nil {
			t.Fatal(err)
		}
		sendN(t, a, y.ID, 2, "before the client started")
		px := newProxy(t, srv.MQTTAddr())
		px.Cut() // the first connection waits for the hooks
		cfg := testConfig(t, px.URL(), 2)
		b, err := client.New(ctxFor(t, 10*time.Second), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeClient(t, b) })
		dropMessages(b, 3, 3) // the message that moves y (direct has 1)
		moved := moveDuringInboxRead(t, srv, b, y.ID)
		px.Resume()
		if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		sendN(t, a, direct, 1, "after the first read") // its catch-up is done
		messages(t, b, direct, 1, 10*time.Second)
		if !moved.Load() {
			t.Fatal("the group was not written to during the inbox read")
		}

		cutOff(t, px, b)
		want := sendN(t, a, y.ID, 2, "while offline")
		px.Resume()
		if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		handedOnOnce(t, b, y.ID, append(want, sendN(t, a, y.ID, 1, "live")[0]))
	})
}

// moveDuringInboxRead gives user 2 200 conversations more recent than
// conv (which is then on their inbox's second page) and has user 1 write
// to conv once c's next inbox read has its first page; the result tells
// that it did.
func moveDuringInboxRead(t *testing.T, srv *server.Server, c *client.Client, conv int64) *atomic.Bool {
	t.Helper()
	for range 200 {
		groupOf12(t, srv)
	}
	var moved atomic.Bool
	c.DropReplies(func(p []byte) bool {
		var page struct {
			Conversations []json.RawMessage `json:"conversations"`
			NextCursor    string            `json:"nextCursor"`
		}
		if json.Unmarshal(p, &page) == nil && page.NextCursor != "" && len(page.Conversations) == 200 && moved.CompareAndSwap(false, true) {
			if _, err := srv.Service.Send(context.Background(), chat.SendRequest{ConversationID: conv, SenderID: 1,
				ClientMsgID: uuid.NewString(), Body: "during the inbox read"}); err != nil {
				t.Error(err)
			}
		}
		return false
	})
	return &moved
}
