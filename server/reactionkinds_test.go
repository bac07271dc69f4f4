package server_test

import (
	"context"
	"fmt"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestANewReactionPastAMessagesKindsIsPUBACK0x99TooManyReactions: over
// MQTT, a new emoji on a message that carries chat.MaxReactionKinds
// distinct emoji is refused for good (0x99, code too_many_reactions, a
// reason string), not 0x97, which clients retry.
func TestANewReactionPastAMessagesKindsIsPUBACK0x99TooManyReactions(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	conv := mustDirect(t, ctx, srv, 1, 2)
	m, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "pick one"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range chat.MaxReactionKinds {
		if _, err := srv.Service.React(ctx, chat.ReactionRequest{ConversationID: conv.ID, UserID: int64(1 + i%2), TargetSeq: m.Message.Seq,
			ClientMsgID: newID(), Emoji: fmt.Sprint("e", i), On: true}); err != nil {
			t.Fatal(err)
		}
	}
	c := rawClient(t, srv.MQTTAddr(), 2, "kinds", 5, true)
	topic := fmt.Sprintf("chat/v1/conv/%d/react", conv.ID)
	rc, code, reason := reasonCode(t, c, topic, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":%d,"emoji":"new","on":true}`, newID(), m.Message.Seq))
	if rc != 0x99 || code != string(chat.CodeTooManyReactions) || reason == "" {
		t.Fatalf("a new emoji on a full message: PUBACK 0x%02x code %q reason %q, want 0x99 too_many_reactions with a reason", rc, code, reason)
	}
}
