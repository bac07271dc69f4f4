package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// An ephemeral client (nothing replayed: history brings what it missed)
// that heard live that its user became a member of a group, by the
// group's creation (conversation.created: seq 0, and no entry until
// someone writes), by being added, or by being added back after a live
// removal (member.added at seq j, the system entry at j+1 lost with the
// connection), and then lost its connection before any entry of the group
// reached it, must catch the group up from that join on reconnecting: the
// messages written while it was offline are its user's, and come before
// the first live one.
func TestAGroupJoinedLiveIsCaughtUpFromTheJoinAfterAReconnect(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"created", "added", "added back"} {
		t.Run(how, func(t *testing.T) {
			srv, _, a, _ := sender(t)
			ctx := ctxFor(t, 60*time.Second)
			px := newProxy(t, srv.MQTTAddr())
			b := connect(t, testConfig(t, px.URL(), 2))
			var members []int64
			if how == "created" {
				members = []int64{2}
			}
			g, err := a.CreateGroup(ctx, how, members)
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "created":
				nextEvent(t, b, client.EventConversationCreated, 10*time.Second)
			case "added back":
				if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
					t.Fatal(err)
				}
				nextEvent(t, b, client.EventMemberAdded, 10*time.Second)
				if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
					t.Fatal(err)
				}
				nextEvent(t, b, client.EventMemberRemoved, 10*time.Second)
				sendN(t, a, g.ID, 1, "while away")
				fallthrough
			case "added":
				b.DropEvents(func(p []byte) bool { // the add's system entry: cut off before it came
					var ev client.Event
					_ = json.Unmarshal(p, &ev)
					return ev.Type == client.EventSystemNew && ev.ConversationID == g.ID
				})
				if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
					t.Fatal(err)
				}
				nextEvent(t, b, client.EventMemberAdded, 10*time.Second)
			}

			cutOff(t, px, b)
			b.DropEvents(nil)
			missed := sendN(t, a, g.ID, 2, "while offline")
			px.Resume()
			if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			live := sendN(t, a, g.ID, 1, "live")[0]
			if m := messages(t, b, g.ID, 1, 10*time.Second); m[0].Seq != missed[0] {
				t.Fatalf("first message of the group handed on: seq %d, want %d (written while offline; the live one is %d)", m[0].Seq, missed[0], live)
			}
			messages(t, b, g.ID, 2, 10*time.Second) // the second missed and the live one, in order
			if h := b.Positions()[g.ID]; h != live {
				t.Fatalf("the group in Positions at %d, want %d", h, live)
			}
		})
	}
}
