package store

import (
	"testing"

	chat "github.com/chatd/chatd"
)

// TestOnlyAPlainBatchOfDistinctConversationsRunsTheDistinctFunction: a
// batch runs chat_send_batch_plain_distinct when it is plain and no
// conversation has two changes in it; chat_send_batch_plain when one
// has; chat_send_batch when a change is not plain.
func TestOnlyAPlainBatchOfDistinctConversationsRunsTheDistinctFunction(t *testing.T) {
	msg := func(conv int64) *sendReq {
		return &sendReq{req: chat.Change{Kind: chat.KindMessage, ConversationID: conv, UserID: 1, ClientMsgID: "x", Body: "b"}}
	}
	reply := msg(3)
	reply.req.ReplyTo = 1
	for _, c := range []struct {
		name string
		reqs []*sendReq
		want string
	}{
		{"a lone send", []*sendReq{msg(1)}, sendDistinctBatchSQL},
		{"two conversations", []*sendReq{msg(1), msg(2)}, sendDistinctBatchSQL},
		{"two sends to one conversation", []*sendReq{msg(1), msg(2), msg(1)}, sendPlainBatchSQL},
		{"a reply among them", []*sendReq{msg(1), reply}, sendBatchSQL},
		{"a lone reply", []*sendReq{reply}, sendBatchSQL},
	} {
		if got := newBatchArgs(c.reqs, nil).batchSQL(); got != c.want {
			t.Errorf("%s: runs %q, want %q", c.name, got, c.want)
		}
	}
}
