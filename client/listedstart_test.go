package client_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// An ephemeral client (nothing replayed: history brings what it missed)
// whose inbox read listed a conversation none of whose entries had come
// (an empty group created with its user, a direct conversation the other
// side opened and nobody wrote in, a group written to only before the
// client started), and which then lost its connection, must hand on what
// was written there while it was offline, before the first live entry,
// each once, and nothing from before the listing. So too when the user
// was removed live from such a group and added back while offline: what
// followed the re-add is theirs.
func TestAConversationListedButNeverTrackedIsCaughtUpAfterTimeOffline(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"empty group", "direct opened by the other side", "group written to before", "left live, added back offline"} {
		t.Run(how, func(t *testing.T) {
			srv, _, a, conv := sender(t)
			ctx := ctxFor(t, 60*time.Second)
			mark, err := a.CreateGroup(ctx, "marker", []int64{2})
			if err != nil {
				t.Fatal(err)
			}
			if how != "direct opened by the other side" {
				g, err := a.CreateGroup(ctx, how, []int64{2})
				if err != nil {
					t.Fatal(err)
				}
				conv = g.ID
			}
			if how == "group written to before" {
				sendN(t, a, conv, 2, "before the client started")
			}
			px := newProxy(t, srv.MQTTAddr())
			b := connect(t, testConfig(t, px.URL(), 2))
			// An entry handed on after the connection: its catch-up,
			// whose inbox read lists conv, is done.
			sendN(t, a, mark.ID, 1, "online")
			messages(t, b, mark.ID, 1, 10*time.Second)
			if how == "left live, added back offline" {
				if err := a.RemoveMember(ctx, conv, 2); err != nil {
					t.Fatal(err)
				}
				nextEvent(t, b, client.EventMemberRemoved, 10*time.Second)
			}

			cutOff(t, px, b)
			if how == "left live, added back offline" {
				if _, err := a.AddMember(ctx, conv, 2); err != nil {
					t.Fatal(err)
				}
			}
			want := sendN(t, a, conv, 3, "while offline")
			px.Resume()
			if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			handedOnOnce(t, b, conv, append(want, sendN(t, a, conv, 1, "live")[0]))
		})
	}
}
