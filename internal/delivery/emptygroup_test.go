package delivery_test

import (
	"context"
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
)

// A member removed from a group before its first entry is owed nothing:
// member.removed carries seq 0, the group's last_seq before the entry
// that announces the removal. Their connected session stops following the
// conversation there, as at any other removal, and added back they get
// what follows the join at once: the join's entry and the message after
// it, and not the entry that announced the removal.
func TestAMemberRemovedBeforeTheGroupsFirstEntryAndAddedBackGetsWhatFollowsTheJoin(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "persistent"}[persistent], func(t *testing.T) {
			ctx := context.Background()
			st, f, rec, conv, _ := nodeOfRecord(t)
			h := startHub(t, f.sessions, delivery.Options{GapWait: time.Hour}) // no gap ends on its own
			s := &stuckConv{st: st, rec: rec, h: h, conv: conv.ID, u3: attachUser(t, h, f, "u3", 3, persistent, true, true)}
			if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
				t.Fatal(err)
			}
			removal := rec.take()
			if removal[0].Type != chat.EventMemberRemoved || removal[0].Seq != 0 {
				t.Fatalf("the removal published %s at %d first, want member.removed at 0", removal[0].Type, removal[0].Seq)
			}
			s.routeOneByOne(t, removal)
			if _, _, err := st.AddMember(ctx, conv.ID, 1, 3, chat.RoleMember); err != nil {
				t.Fatal(err)
			}
			s.routeOneByOne(t, append(rec.take(), sendSeqsAs(t, st, rec, conv.ID, 1, 1)...))
			waitEntry(t, s.u3, conv.ID, 2) // the join's
			if got := waitSeqs(t, s.u3, conv.ID, 1); !slices.Equal(got, []int64{3}) {
				t.Fatalf("user 3 got messages %v, want [3]", got)
			}
			if _, ok := s.u3.entry(conv.ID, 1); ok {
				t.Fatal("user 3 got the entry that announced their removal")
			}
		})
	}
}

// A group's conversation.created that arrives again (Kafka redelivering,
// a relay leader's batch landing late) after a member was removed before
// the first entry is no word on who is a member: the members read or
// routed since hold the creation, which writes no entry (a removal at 0
// commits with the entry at 1, after it). The removed member stays out:
// neither the creation again nor what follows reaches them.
func TestAGroupsCreationArrivingAgainAfterARemovalBeforeTheFirstEntryDoesNotBringTheMemberBack(t *testing.T) {
	ctx := context.Background()
	st, f, rec, conv, _ := nodeOfRecord(t)
	h := startHub(t, f.sessions, delivery.Options{})
	stays := attachUser(t, h, f, "stays", 2, false, true, true)
	s := &stuckConv{st: st, rec: rec, h: h, conv: conv.ID, u3: attachUser(t, h, f, "u3", 3, false, true, true)}
	created := chat.ConversationCreatedEvent(conv, 1)
	s.routeOneByOne(t, []chat.Event{created}) // the member index holds the group from it
	if err := st.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	s.routeOneByOne(t, append(rec.take(), created)) // the removal, then the creation again
	s.routeOneByOne(t, sendSeqsAs(t, st, rec, conv.ID, 1, 1))
	waitSeqs(t, stays, conv.ID, 1)
	if n := events(s.u3, chat.EventConversationCreated, conv.ID); n != 1 {
		t.Errorf("the removed member got conversation.created %d times, want once, before their removal", n)
	}
	for seq := int64(1); seq <= 2; seq++ {
		if _, ok := s.u3.entry(conv.ID, seq); ok {
			t.Errorf("the removed member got entry %d, committed after their removal", seq)
		}
	}
}
