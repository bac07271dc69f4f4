package relay_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

// A reply relayed after an edit of the message it quotes committed carries
// the quote its send published live, the message as it was at the reply:
// the other nodes deliver what the replier's node delivered, and a member
// added after that message, whom the edit reaches without its body, does
// not read the new text in the quote either.
func TestKafkaCarriesAReplysQuoteAsItWasSentWhenTheQuotedMessageWasEditedBeforeTheRelay(t *testing.T) {
	pool, st, conv := storeGroup(t)
	ctx := context.Background()
	send := func(sender int64, body string, replyTo int64) chat.Message {
		t.Helper()
		res, err := st.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: sender, ClientMsgID: uuid.NewString(), Body: body, ReplyTo: replyTo})
		if err != nil {
			t.Fatal(err)
		}
		return res.Message
	}
	quoted := send(1, "as it was", 0)
	reply := send(2, "re", quoted.Seq)
	if reply.ReplyTo == nil || reply.ReplyTo.Snippet != "as it was" {
		t.Fatalf("the reply's live quote %+v, want %q", reply.ReplyTo, "as it was")
	}
	if _, err := st.Change(ctx, chat.Change{Kind: chat.KindEdit, ConversationID: conv.ID, UserID: 1, TargetSeq: quoted.Seq,
		ClientMsgID: uuid.NewString(), Body: "rewritten since"}); err != nil {
		t.Fatal(err)
	}
	// conversation.created, the message, the reply, the edit.
	checkRelayedAsLive(t, relayEntries(t, pool), 4, reply)
}
