package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	chat "github.com/chatd/chatd"
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
