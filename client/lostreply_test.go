package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// loseNextReply makes c lose the reply of the test's next request
// together with its connection, as when the connection ends before
// chatd's reply: chatd then answers no one (docs/protocol.md
// "Request/response over MQTT v5"). The client reads by itself too, and
// those replies come through: every connection's catch-up reads the
// inbox, and may still be reading it when the test's request goes out
// (the first connection's, right after connect returns, as well as a
// reconnection's); a catch-up fills gaps through history. Lost instead,
// such a reply would end the connection while the test's request, on it
// too, could still be answered there.
func loseNextReply(c *client.Client) {
	loseNextReplyWhere(c, func(payload []byte) bool { return !backgroundRead(payload) })
}

// loseNextReplyHolding is loseNextReply for the next reply that holds s.
func loseNextReplyHolding(c *client.Client, s string) {
	loseNextReplyWhere(c, func(payload []byte) bool { return bytes.Contains(payload, []byte(s)) })
}

// loseNextReplyWhere makes c lose the next reply that match holds for,
// and its connection with it.
func loseNextReplyWhere(c *client.Client, match func(payload []byte) bool) {
	var lost atomic.Bool
	c.DropReplies(func(payload []byte) bool {
		if !match(payload) || !lost.CompareAndSwap(false, true) {
			return false
		}
		go c.TerminateConnection() // not on paho's reader, which calls this
		return true
	})
}

// backgroundRead reports whether payload is the reply of a read the
// client makes by itself: an inbox page or a history page.
func backgroundRead(payload []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(payload, &keys) != nil {
		return false
	}
	_, inbox := keys["conversations"]
	_, history := keys["messages"]
	return inbox || history
}

func TestARequestWhoseConnectionEndedBeforeItsReplyIsAskedAgainOrFailsPromptly(t *testing.T) {
	_, _, a, conv := sender(t)
	connects := a.Stats().Connects

	// A read is asked again on the next connection.
	loseNextReply(a)
	start := time.Now()
	got, err := a.Conversation(ctxFor(t, 10*time.Second), conv)
	if err != nil || got.ID != conv {
		t.Fatalf("conversation after a lost reply: %+v, %v", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the read took %v: it waited for a reply that could not come", d)
	}
	if n := a.Stats().Connects; n <= connects {
		t.Fatalf("connects %d: the reply was lost without its connection", n)
	}

	// A change that a repeat would not answer as the first is not re-sent
	// (it may have run): it fails at once. An upload's ticket without a
	// key is one (a second is another upload, charged again). The catch-up
	// of the connection the read came back on may still be reading the
	// inbox: its reply must not be the one lost.
	loseNextReplyHolding(a, `"uploadId"`)
	start = time.Now()
	err = a.CallOnce(ctxFor(t, 10*time.Second), "upload.create", map[string]any{"conversationId": conv, "name": "note.txt", "contentType": "text/plain", "size": 5})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("upload ticket whose reply was lost: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the change took %v to fail: it waited for a reply that could not come", d)
	}
}

// A group change whose reply was lost with its connection ran on chatd;
// asked again on the next connection, it is answered as the first was,
// and done once: the create (its key) makes one group, the removal and
// the transfer succeed instead of failing.
func TestAGroupChangeWhoseReplyWasLostIsAskedAgainAndDoneOnce(t *testing.T) {
	t.Parallel()
	_, _, a, _ := sender(t)
	ctx := ctxFor(t, 20*time.Second)
	before, err := a.Inbox(ctx, client.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loseNextReply(a)
	g, err := a.CreateGroup(ctx, "lost", []int64{2, 3})
	if err != nil {
		t.Fatalf("create group after a lost reply: %v", err)
	}
	after, err := a.Inbox(ctx, client.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.Conversations) - len(before.Conversations); n != 1 {
		t.Fatalf("the create made %d groups, want 1", n)
	}
	loseNextReply(a)
	if err := a.RemoveMember(ctx, g.ID, 3); err != nil {
		t.Fatalf("remove a member after a lost reply: %v", err)
	}
	loseNextReply(a)
	if err := a.TransferOwnership(ctx, g.ID, 2); err != nil {
		t.Fatalf("transfer ownership after a lost reply: %v", err)
	}
	conv, err := a.Conversation(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[int64]string{}
	for _, m := range conv.Members {
		roles[m.UserID] = m.Role
	}
	if len(roles) != 2 || roles[1] != "admin" || roles[2] != "owner" {
		t.Fatalf("members after the changes: %v, want 1 admin and 2 owner", roles)
	}
}

// An upload whose ticket reply was lost with its connection is asked
// again on the next connection with the same key: chatd answers the
// upload the first request made, so the file is one upload, its bytes
// charged once against the day's quota, and Upload succeeds.
func TestAnUploadTicketWhoseReplyWasLostIsAskedAgainAndIsOneUpload(t *testing.T) {
	t.Parallel()
	srv, broker, _, conv := sender(t)
	cfg := testConfig(t, broker, 1)
	cfg.HTTPURL = "http://" + srv.HTTPAddr()
	a := connect(t, cfg)
	ctx := ctxFor(t, 20*time.Second)
	const text = "notes for the trip"
	loseNextReply(a)
	att, err := a.Upload(ctx, conv, "notes.txt", strings.NewReader(text))
	if err != nil {
		t.Fatalf("upload after its ticket's reply was lost: %v", err)
	}
	if att.Size != int64(len(text)) {
		t.Fatalf("upload: %+v", att)
	}
	var uploads, charged int64
	if err := srv.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM attachment WHERE uploader_id = 1),
		(SELECT COALESCE(sum(bytes), 0) FROM upload_quota WHERE user_id = 1)`).Scan(&uploads, &charged); err != nil {
		t.Fatal(err)
	}
	if uploads != 1 || charged != int64(len(text)) {
		t.Fatalf("one file made %d uploads and charged %d bytes, want 1 and %d", uploads, charged, len(text))
	}
}
