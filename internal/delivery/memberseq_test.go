package delivery

import (
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
)

// A membership event can reach the index after a newer one of the same
// member: the old relay leader's batch landing after the new leader's,
// Kafka redelivering after a consumer restart, or another node's event
// arriving through Kafka after this node's own. The older one changes
// nothing.
func TestMemberIndexIgnoresAMembershipEventOlderThanWhatItApplied(t *testing.T) {
	x := newMemberIndex(10)
	// The load read user 2 rejoined: removed at 5, added at 7, read at 9.
	x.set(7, chat.Routing{Members: []int64{1, 2}, Seq: 9})
	x.apply(chat.Event{Type: chat.EventMemberRemoved, ConversationID: 7, UserID: 2, Seq: 5})
	if r, _ := x.get(7); !slices.Equal(r.Members, []int64{1, 2}) {
		t.Fatalf("after a member.removed older than the load: members %v, want [1 2]", r.Members)
	}
	// Read at 3, before both: the removal and the join apply, then the
	// removal arrives again.
	x.set(8, chat.Routing{Members: []int64{1, 2}, Seq: 3})
	for i, ev := range []chat.Event{
		{Type: chat.EventMemberRemoved, ConversationID: 8, UserID: 2, Seq: 4},
		{Type: chat.EventMemberAdded, ConversationID: 8, UserID: 2, Seq: 6},
		{Type: chat.EventMemberRemoved, ConversationID: 8, UserID: 2, Seq: 4},
	} {
		if late := x.apply(ev); late != (i == 2) {
			t.Fatalf("%s at %d reported late: %v, want %v (not routed: every session had the join at 6)", ev.Type, ev.Seq, late, i == 2)
		}
	}
	if r, _ := x.get(8); !slices.Equal(r.Members, []int64{1, 2}) {
		t.Fatalf("after member.removed at 4 again after member.added at 6: members %v, want [1 2]", r.Members)
	}
	// A conversation.created again restores no member who left since.
	x.apply(chat.Event{Type: chat.EventMemberRemoved, ConversationID: 8, UserID: 1, Seq: 8})
	x.apply(chat.Event{Type: chat.EventConversationCreated, ConversationID: 8, Members: []int64{1, 2}, Seq: 0})
	if r, _ := x.get(8); !slices.Equal(r.Members, []int64{2}) {
		t.Fatalf("after conversation.created again: members %v, want [2]", r.Members)
	}
}

// What the index saw of a member's memberships outlasts a reload of the
// conversation (another member's join forgets it): their late removal is
// still late after it.
func TestMemberIndexKnowsAMembersLastMembershipEventAcrossAReload(t *testing.T) {
	x := newMemberIndex(10)
	x.set(7, chat.Routing{Members: []int64{1, 2}, Seq: 3})
	x.apply(chat.Event{Type: chat.EventMemberRemoved, ConversationID: 7, UserID: 2, Seq: 4})
	x.apply(chat.Event{Type: chat.EventMemberAdded, ConversationID: 7, UserID: 2, Seq: 6})
	joined := chat.Event{Type: chat.EventMemberAdded, ConversationID: 7, UserID: 3, Seq: 9}
	x.refresh(joined)
	x.wait(joined)
	x.loaded(7, chat.Routing{Members: []int64{1, 2, 3}, Seq: 10})
	if !x.apply(chat.Event{Type: chat.EventMemberRemoved, ConversationID: 7, UserID: 2, Seq: 4}) {
		t.Fatal("member.removed at 4 after member.added at 6 and a reload is not late: it would be routed, ending the member's stream")
	}
}

// conversation.updated (the group's settings) and member.updated (a
// member's role) are states: one older than one the index saw, across
// the reload each conversation.updated causes, is late. A role's seq is
// apart from its member's memberships: a join relayed after the member's
// newer role change is as it was (in the load, not late).
func TestMemberIndexReportsAnOlderGroupSettingsOrRoleEventLate(t *testing.T) {
	x := newMemberIndex(10)
	x.set(7, chat.Routing{Members: []int64{1, 2}, Seq: 3})
	newer := chat.Event{Type: chat.EventConversationUpdated, ConversationID: 7, Seq: 6}
	x.refresh(newer)
	if x.apply(newer) {
		t.Fatal("conversation.updated at 6, the first, reported late")
	}
	x.loaded(7, chat.Routing{Members: []int64{1, 2}, Seq: 6})
	x.apply(newer) // as membersLoaded applies the events that waited
	older := chat.Event{Type: chat.EventConversationUpdated, ConversationID: 7, Seq: 5}
	x.refresh(older)
	x.loaded(7, chat.Routing{Members: []int64{1, 2}, Seq: 6})
	if !x.apply(older) {
		t.Fatal("conversation.updated at 5 after the one at 6 and a reload is not late: clients would apply the older settings last")
	}
	if x.apply(newer) {
		t.Fatal("conversation.updated at 6 again (Kafka redelivering) reported late")
	}

	if x.apply(chat.Event{Type: chat.EventMemberUpdated, ConversationID: 7, UserID: 2, Role: chat.RoleMember, Seq: 8}) {
		t.Fatal("member.updated at 8, the first of user 2, reported late")
	}
	if !x.apply(chat.Event{Type: chat.EventMemberUpdated, ConversationID: 7, UserID: 2, Role: chat.RoleAdmin, Seq: 7}) {
		t.Fatal("member.updated at 7 after the one at 8 is not late")
	}
	if x.apply(chat.Event{Type: chat.EventMemberAdded, ConversationID: 7, UserID: 2, Seq: 4}) {
		t.Fatal("member.added at 4, in the load, reported late after a role change at 8: its sessions would miss the join")
	}
}
