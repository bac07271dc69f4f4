package client_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestAMemberRemovedWhileAskingAboutAJoinEntryComesAfterTheGroupsEntries:
// user 2 is removed from a group while chatd is asked whether their own
// member.added entry starts their membership of it
// (askedAboutAJoinEntry). Their member.removed waits with the group's
// entries for the answer and comes after them, in the order chatd sent
// them; the group, which the user is no longer in, is left out of
// Positions.
func TestAMemberRemovedWhileAskingAboutAJoinEntryComesAfterTheGroupsEntries(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 15*time.Second)
	held := sendN(t, j.a, j.g, 2, "while asked")
	if err := j.a.RemoveMember(ctxFor(t, 10*time.Second), j.g, 2); err != nil {
		t.Fatal(err)
	}
	watchEvents(t, j.b, 3*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == j.g {
			t.Fatalf("%s of the group (seq %d) handed on though chatd never answered about its join entry", ev.Type, ev.Seq)
		}
		return false
	})
	j.b.DropReplies(nil) // chatd's answer to the next question comes

	var seqs []int64
	removed := false
	if !watchEvents(t, j.b, 60*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != j.g {
			return false
		}
		if ev.Type == client.EventMemberRemoved && ev.UserID == 2 {
			removed = true
			return true
		}
		if ev.Seq > 0 {
			if len(seqs) == 0 && !j.isJoinEntry(ev) {
				t.Fatalf("entry %d of the group (%s) handed on before its join entry", ev.Seq, ev.Type)
			}
			seqs = append(seqs, ev.Seq)
		}
		return false
	}) {
		t.Fatalf("within 60s of chatd answering: entries of the group %v, member.removed %v", seqs, removed)
	}
	if want := []int64{held[0] - 1, held[0], held[1]}; len(seqs) < len(want) || seqs[0] != want[0] || seqs[1] != want[1] || seqs[2] != want[2] {
		t.Fatalf("entries of the group before the member.removed: %v, want %v first (the join entry, then what came while chatd was asked)", seqs, want)
	}
	if h, ok := j.b.Positions()[j.g]; ok {
		t.Fatalf("the group the user was removed from is in Positions at %d", h)
	}
}
