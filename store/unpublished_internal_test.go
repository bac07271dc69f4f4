package store

import (
	"fmt"
	"testing"

	chat "github.com/chatd/chatd"
)

func unpublishedReq(conv int64, id string) *sendReq {
	return &sendReq{req: chat.Change{ConversationID: conv, ClientMsgID: id}}
}

// TestUnpublishedIsTakenOnceAndForgetsTheOldestPastItsBound: a change
// remembered is taken once; past maxUnpublished the oldest is forgotten,
// but not one remembered again since it was first added.
func TestUnpublishedIsTakenOnceAndForgetsTheOldestPastItsBound(t *testing.T) {
	var u unpublished
	if u.take(1, "a") {
		t.Fatal("took a change never remembered")
	}
	u.add([]*sendReq{unpublishedReq(1, "a"), unpublishedReq(2, "a")})
	if !u.take(1, "a") || u.take(1, "a") {
		t.Fatal("a remembered change is not taken exactly once")
	}
	u.add([]*sendReq{unpublishedReq(1, "a")}) // again, after (2, a)
	for i := range maxUnpublished - 1 {
		u.add([]*sendReq{unpublishedReq(3, fmt.Sprint(i))})
	}
	if u.take(2, "a") {
		t.Error("the oldest change was not forgotten past the bound")
	}
	if !u.take(1, "a") {
		t.Error("a change remembered again was forgotten with its first adding")
	}
	if !u.take(3, fmt.Sprint(maxUnpublished-2)) {
		t.Error("the newest change was forgotten")
	}
	if len(u.order) > maxUnpublished || len(u.keys) > maxUnpublished {
		t.Errorf("%d remembered in order, %d keys; want at most %d", len(u.order), len(u.keys), maxUnpublished)
	}
}
