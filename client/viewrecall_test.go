package client_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestALiveRecallTakesTheQuoteForwardAndEditOffAMessageTheViewHolds: the
// view holds a reply, a forward and an edited message; a message.recalled
// of each leaves it recalled and nothing more: no quote, no forward
// header, no "edited". A message that arrives recalled (an older server's
// catch-up still carrying them) reads the same.
func TestALiveRecallTakesTheQuoteForwardAndEditOffAMessageTheViewHolds(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v := client.NewView(2)
	for _, ev := range []client.Event{
		{Type: client.EventMessageNew, ConversationID: 7, Seq: 1, SenderID: 1, Body: "lunch?", CreatedAt: at},
		{Type: client.EventMessageNew, ConversationID: 7, Seq: 2, SenderID: 1, Body: "at noon", CreatedAt: at,
			ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch?"}},
		{Type: client.EventMessageNew, ConversationID: 7, Seq: 3, SenderID: 1, Body: "only for us", CreatedAt: at,
			ForwardedFrom: &client.ForwardRef{ConversationID: 9, Seq: 4, SenderID: 3}},
		{Type: client.EventMessageNew, ConversationID: 7, Seq: 4, SenderID: 1, Body: "helo", CreatedAt: at},
		{Type: client.EventMessageEdited, ConversationID: 7, Seq: 5, TargetSeq: 4, SenderID: 1, Body: "hello", EditedAt: &at},
		{Type: client.EventMessageRecalled, ConversationID: 7, Seq: 6, TargetSeq: 2, ActorID: 1, RecalledAt: &at},
		{Type: client.EventMessageRecalled, ConversationID: 7, Seq: 7, TargetSeq: 3, ActorID: 1, RecalledAt: &at},
		{Type: client.EventMessageRecalled, ConversationID: 7, Seq: 8, TargetSeq: 4, ActorID: 1, RecalledAt: &at},
		{Type: client.EventMessageNew, ConversationID: 7, Seq: 9, SenderID: 1, CreatedAt: at, Recalled: true, RecalledAt: &at,
			ReplyTo: &client.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch?"}, EditedAt: &at},
	} {
		v.Apply(ev)
	}
	for _, m := range v.Messages(7)[1:] {
		if !m.Recalled || m.Body != "" || m.ReplyTo != nil || m.ForwardedFrom != nil || m.EditedAt != nil || len(m.Reactions) > 0 {
			t.Errorf("recalled message %d still shows %+v", m.Seq, m)
		}
	}
}
