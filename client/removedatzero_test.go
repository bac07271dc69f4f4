package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// A group created with the user and left before anything was written in
// it is left at seq 0: chatd's member.removed then carries no seq (0 is
// omitted), which is still the leave's seq, not an unknown one. An
// ephemeral client whose user is added back (while it is offline, or
// live with the member.added lost) must track the group again from
// there: what followed the new join comes before the first live message,
// each once, and the group is in Positions.
func TestAGroupLeftAtSeqZeroAndAddedBackIsTrackedAgain(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"while offline", "live, member.added lost"} {
		t.Run(how, func(t *testing.T) {
			srv, _, a, _ := sender(t)
			ctx := ctxFor(t, 60*time.Second)
			px := newProxy(t, srv.MQTTAddr())
			b := connect(t, testConfig(t, px.URL(), 2))
			g, err := a.CreateGroup(ctx, "left at 0", []int64{2})
			if err != nil {
				t.Fatal(err)
			}
			nextEvent(t, b, client.EventConversationCreated, 10*time.Second)
			if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
				t.Fatal(err)
			}
			if ev := nextEvent(t, b, client.EventMemberRemoved, 10*time.Second); ev.Seq != 0 {
				t.Fatalf("member.removed at seq %d, want 0 (nothing written before the leave)", ev.Seq)
			}

			if how == "while offline" {
				cutOff(t, px, b)
			} else {
				b.DropEvents(func(p []byte) bool {
					var ev client.Event
					_ = json.Unmarshal(p, &ev)
					return ev.Type == client.EventMemberAdded
				})
			}
			if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
				t.Fatal(err)
			}
			missed := sendN(t, a, g.ID, 3, "after the re-add")
			if how == "while offline" {
				px.Resume()
				if err := b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			live := sendN(t, a, g.ID, 1, "live")[0]
			handedOnOnce(t, b, g.ID, append(missed, live))
		})
	}
}
