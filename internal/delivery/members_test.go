package delivery

import (
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
)

func TestMemberIndexForgetsTheLeastRecentlyRoutedConversationNotAll(t *testing.T) {
	x := newMemberIndex(3)
	for conv := int64(1); conv <= 3; conv++ {
		x.set(conv, []int64{conv, 100})
	}
	x.get(1) // 1 is the most recently used now, 2 the least
	x.set(4, []int64{4})
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
	if m, _ := x.get(7); !slices.Equal(m, []int64{1, 2}) {
		t.Fatalf("members %v, want [1 2]", m)
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
	evs := x.loaded(9, []int64{1, 2})
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 {
		t.Fatalf("waiting events %+v", evs)
	}
	if len(x.waiting) != 0 {
		t.Fatal("events still waiting after the load")
	}
}
