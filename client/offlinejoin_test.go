package client_test

import (
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// An ephemeral client (nothing replayed: history brings what it missed)
// whose user became a member of a group while it was offline (created
// with them, or added to a group whose history is "all"), so that no
// conversation.created or member.added reached it, must catch the group
// up from that join on reconnecting: the messages written since are its
// user's and come before the first live one, each once; those from before
// the join are not handed on as new.
func TestAGroupJoinedWhileOfflineIsCaughtUpFromTheJoinAfterAReconnect(t *testing.T) {
	for _, how := range []string{"created", "added"} {
		t.Run(how, func(t *testing.T) {
			srv, _, a, direct := sender(t)
			ctx := ctxFor(t, 60*time.Second)
			px := newProxy(t, srv.MQTTAddr())
			b := connect(t, testConfig(t, px.URL(), 2))
			// An entry that came after the connection: its catch-up (the
			// inbox as it was before the join) is done.
			sendN(t, a, direct, 1, "before going offline")
			messages(t, b, direct, 1, 10*time.Second)

			px.Cut()
			testkit.WaitFor(t, 10*time.Second, "user 2 to go offline", func() bool { return !b.Connected() })
			var g client.Conversation
			var err error
			if how == "created" {
				g, err = a.CreateGroup(ctx, how, []int64{2})
			} else {
				all := "all"
				g, err = a.CreateGroup(ctx, how, nil)
				if err == nil {
					_, err = a.UpdateGroup(ctx, g.ID, client.GroupUpdate{HistoryVisible: &all})
				}
				if err == nil {
					sendN(t, a, g.ID, 2, "before the join")
					_, err = a.AddMember(ctx, g.ID, 2)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			missed := sendN(t, a, g.ID, 3, "while offline")
			px.Resume()
			if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			live := sendN(t, a, g.ID, 1, "live")[0]
			handedOnOnce(t, b, g.ID, append(missed, live))
		})
	}
}

// handedOnOnce checks that c hands on the message.new events of conv of
// seqs want, in that order, and no other, and that Positions has conv at
// the last.
func handedOnOnce(t *testing.T, c *client.Client, conv int64, want []int64) {
	t.Helper()
	var seqs []int64
	for _, ev := range messages(t, c, conv, len(want), 10*time.Second) {
		seqs = append(seqs, ev.Seq)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("messages of conversation %d handed on: seqs %v, want %v", conv, seqs, want)
	}
	noMoreMessages(t, c, conv, 500*time.Millisecond)
	if h, ok := c.Positions()[conv]; !ok || h != want[len(want)-1] {
		t.Fatalf("conversation %d in Positions: %d %v, want tracked at %d", conv, h, ok, want[len(want)-1])
	}
}
