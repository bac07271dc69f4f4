package client_test

import (
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAReconnectionWhileAskingAboutAJoinEntryLosesNoneOfTheGroupsEntries:
// user 2's connection goes down and comes back while chatd is asked
// whether their own member.added entry starts their membership of a group
// (askedAboutAJoinEntry), entries of the group written before, while and
// after it was down. The new connection's catch-up runs while the group's
// events are held (it leaves the group for the answer); once chatd
// answers, the join entry comes, then every entry after it, in order and
// without a gap, and Positions tracks the group at the last one.
func TestAReconnectionWhileAskingAboutAJoinEntryLosesNoneOfTheGroupsEntries(t *testing.T) {
	t.Parallel()
	j := askedAboutAJoinEntry(t, 15*time.Second)
	held := sendN(t, j.a, j.g, 2, "while asked")
	cutOff(t, j.px, j.b)
	down := sendN(t, j.a, j.g, 2, "while down")
	j.px.Resume()
	testkit.WaitFor(t, 20*time.Second, "user 2 to connect again", j.b.Connected)
	after := sendN(t, j.a, j.g, 1, "after")
	// Still unanswered: the group's entries wait, the catch-up ran.
	watchEvents(t, j.b, 3*time.Second, func(ev client.Event) bool {
		if ev.ConversationID == j.g && ev.Seq > 0 {
			t.Fatalf("entry %d of the group (%s) handed on though chatd never answered about its join entry", ev.Seq, ev.Type)
		}
		return false
	})
	j.b.DropReplies(nil) // chatd's answer to the next question comes

	want := append([]int64{held[0] - 1}, slices.Concat(held, down, after)...)
	var seqs []int64
	if !watchEvents(t, j.b, 60*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != j.g || ev.Seq == 0 {
			return false
		}
		if len(seqs) == 0 && !j.isJoinEntry(ev) {
			t.Fatalf("entry %d of the group (%s) handed on before its join entry", ev.Seq, ev.Type)
		}
		seqs = append(seqs, ev.Seq)
		return ev.Seq >= after[0]
	}) {
		t.Fatalf("entries of the group within 60s of the reconnection: %v, want %v", seqs, want)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("entries of the group handed on: %v, want %v (the join entry, then every entry after it once)", seqs, want)
	}
	if h, ok := j.b.Positions()[j.g]; !ok || h != after[0] {
		t.Fatalf("the group in Positions: %d %v, want tracked at %d", h, ok, after[0])
	}
}
