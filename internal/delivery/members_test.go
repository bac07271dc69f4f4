package delivery

import (
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
)

func TestMemberIndexForgetsTheLeastRecentlyRoutedConversationNotAll(t *testing.T) {
	x := newMemberIndex(3)
	for conv := int64(1); conv <= 3; conv++ {
		x.set(conv, chat.Routing{Members: []int64{conv, 100}})
	}
	x.get(1) // 1 is the most recently used now, 2 the least
	x.set(4, chat.Routing{Members: []int64{4}})
	if _, ok := x.get(2); ok {
		t.Fatal("the least recently routed conversation is still indexed")
	}
	for _, conv := range []int64{1, 3, 4} {
		if _, ok := x.get(conv); !ok {
			t.Fatalf("conversation %d was forgotten with the least recent one", conv)
		}
	}
}

func TestMemberIndexFollowsMembershipEvents(t *testing.T) {
	x := newMemberIndex(10)
	x.apply(chat.Event{Type: chat.EventConversationCreated, ConversationID: 7, Members: []int64{3, 1}})
	x.apply(chat.Event{Type: chat.EventMemberAdded, ConversationID: 7, UserID: 2})
	x.apply(chat.Event{Type: chat.EventMemberAdded, ConversationID: 7, UserID: 2}) // again: idempotent
	x.apply(chat.Event{Type: chat.EventMemberRemoved, ConversationID: 7, UserID: 3})
	x.apply(chat.Event{Type: chat.EventMemberAdded, ConversationID: 8, UserID: 5}) // unknown: left to its load
	if r, _ := x.get(7); !slices.Equal(r.Members, []int64{1, 2}) {
		t.Fatalf("members %v, want [1 2]", r.Members)
	}
	if _, ok := x.get(8); ok {
		t.Fatal("a conversation never loaded got members from an event alone")
	}
}

func TestMemberIndexQueuesEventsBehindALoadInOrder(t *testing.T) {
	x := newMemberIndex(10)
	first := x.wait(chat.Event{ConversationID: 9, Seq: 1})
	second := x.wait(chat.Event{ConversationID: 9, Seq: 2})
	if !first || second {
		t.Fatalf("loads requested: %v %v, want one", first, second)
	}
	evs := x.loaded(9, chat.Routing{Members: []int64{1, 2}})
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 {
		t.Fatalf("waiting events %+v", evs)
	}
	if len(x.waiting) != 0 {
		t.Fatal("events still waiting after the load")
	}
}

// A join or a settings change that arrives forgets the conversation, so
// the event waits for a load with exact floors; a join that a load did
// not see gets the join's seq as floor, the safe side.
func TestMemberIndexReloadsFloorsAJoinOrASettingsChangeDoesNotSay(t *testing.T) {
	x := newMemberIndex(10)
	for _, typ := range []string{chat.EventMemberAdded, chat.EventConversationUpdated} {
		x.set(7, chat.Routing{Members: []int64{1, 2}})
		x.refresh(chat.Event{Type: typ, ConversationID: 7, UserID: 3, Seq: 5})
		if _, ok := x.get(7); ok {
			t.Fatalf("%s left the members it may change the floors of indexed", typ)
		}
	}
	x.set(7, chat.Routing{Members: []int64{1, 3}})
	x.refresh(chat.Event{Type: chat.EventMessageNew, ConversationID: 7, Seq: 5})
	x.apply(chat.Event{Type: chat.EventMemberAdded, ConversationID: 7, UserID: 2, Seq: 5})
	r, _ := x.get(7)
	if !slices.Equal(r.Members, []int64{1, 2, 3}) || !slices.Equal(r.Floors, []int64{0, 5, 0}) {
		t.Fatalf("after a join the load did not see: %+v, want members [1 2 3] with floors [0 5 0]", r)
	}
	x.apply(chat.Event{Type: chat.EventMemberRemoved, ConversationID: 7, UserID: 1})
	if r, _ = x.get(7); !slices.Equal(r.Members, []int64{2, 3}) || !slices.Equal(r.Floors, []int64{5, 0}) {
		t.Fatalf("after a leave: %+v, want members [2 3] with floors [5 0]", r)
	}
}
