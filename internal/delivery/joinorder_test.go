package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// A member added gets member.added before the entries that follow their
// join, also when those committed before the hub routed the join (its
// fan-out lagged): told of the join, the session catches the new stream
// up from PostgreSQL at once, and an event offered apart from the join
// could go out after what that read brought (docs/protocol.md "Events").
// The same for a group's creation and its conversation.created. The race
// is narrow: the test joins 40 groups each way.
func TestAJoinsEventComesBeforeTheEntriesAfterItCommittedBeforeItIsRouted(t *testing.T) {
	for _, created := range []bool{false, true} {
		want := map[bool]string{false: chat.EventMemberAdded, true: chat.EventConversationCreated}[created]
		t.Run(want, func(t *testing.T) {
			ctx := context.Background()
			st, f, rec, _, h := nodeOfRecord(t)
			joins := attachUser(t, h, f, "joins", 4, false, true, true)
			for i := range 40 {
				members := []int64{2}
				if created {
					members = append(members, 4)
				}
				conv, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: fmt.Sprint("joined ", i), Members: members})
				if err != nil {
					t.Fatal(err)
				}
				if !created {
					rec.take()
					if _, _, err := st.AddMember(ctx, conv.ID, 1, 4, chat.RoleMember); err != nil {
						t.Fatal(err)
					}
				}
				for _, ev := range append(rec.take(), sendSeqsAs(t, st, rec, conv.ID, 1, 2)...) {
					h.Deliver(ev)
				}
				waitSeqs(t, joins, conv.ID, 2)
				if got := firstOf(joins, conv.ID); got != want {
					t.Fatalf("group %d of 40: user 4 got %s first, want %s", i+1, got, want)
				}
			}
		})
	}
}

// firstOf is the type of the first event c was sent for conv.
func firstOf(c *fakeConn, conv int64) string {
	for _, p := range c.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) == nil && ev.ConversationID == conv {
			return ev.Type
		}
	}
	return ""
}

// The same for a member added back while their session still delivers
// what the removal left them owed, which waits behind a full window:
// member.added comes after that tail and before what follows the join.
func TestAMemberAddedBackWhileOwedTheOldTailGetsMemberAddedBetweenTheTailAndTheNewEntries(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	h := startHub(t, f.sessions, delivery.Options{Window: 1})
	back := attachUser(t, h, f, "back", 3, false, false, true) // acknowledges when told
	for _, ev := range sendSeqsAs(t, st, rec, conv.ID, 1, 3) {
		h.Deliver(ev)
	}
	waitSeqs(t, back, conv.ID, 1) // 2 and 3 wait for the window
	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	evs := sendSeqsAs(t, st, rec, conv.ID, 1, 1) // the removal, and a message while away
	if _, _, err := st.AddMember(ctx, conv.ID, 1, 3, chat.RoleMember); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, sendSeqsAs(t, st, rec, conv.ID, 1, 2)...) // the re-add, and two messages
	var left, joined int64
	for _, ev := range evs {
		switch ev.Type {
		case chat.EventMemberRemoved:
			left = ev.Seq
		case chat.EventMemberAdded:
			joined = ev.Seq
		}
		h.Deliver(ev)
	}
	// Acknowledge each delivery as it comes until the last message.
	last := evs[len(evs)-1].Seq
	acked := 0
	testkit.WaitFor(t, 10*time.Second, "user 3 to get the messages after the re-add", func() bool {
		ps := back.packets()
		for ; acked < len(ps); acked++ {
			if ps[acked].QoS > 0 {
				h.Acked("back", back, ps[acked].PacketID)
			}
		}
		_, ok := back.entry(conv.ID, last)
		return ok
	})
	var got []string
	at := -1
	for _, p := range back.packets() {
		var ev chat.Event
		if json.Unmarshal(p.Payload, &ev) != nil || ev.ConversationID != conv.ID {
			continue
		}
		got = append(got, fmt.Sprintf("%s %d", ev.Type, ev.Seq))
		switch {
		case ev.Type == chat.EventMemberAdded:
			at = len(got) - 1
		case ev.IsEntry() && ev.Seq <= left && at >= 0, ev.IsEntry() && ev.Seq > joined && at < 0:
			t.Fatalf("user 3 got %v: member.added (at %d) is not between what the leave at %d owed and what followed the join", got, joined, left)
		}
	}
	if at < 0 {
		t.Fatalf("user 3 got %v, no member.added", got)
	}
}
