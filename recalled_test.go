package chat_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// TestARecalledMessageEncodesAsRecalledAndNothingMore: a message marked
// recalled, whatever else it still holds (a quote, a forward, an edit, a
// body, files, reactions), encodes in history's JSON and in message.new
// with its seq, sender, clientMsgId, time and recall alone.
func TestARecalledMessageEncodesAsRecalledAndNothingMore(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m := chat.Message{ConversationID: 7, Seq: 3, Kind: chat.KindMessage, SenderID: 1, ClientMsgID: "c", Body: "only for us",
		CreatedAt: at, MsgType: chat.MsgImage, Attachments: []chat.Attachment{{ID: "a"}},
		ReplyTo: &chat.ReplyRef{Seq: 1, SenderID: 1, Snippet: "lunch?"}, ForwardedFrom: &chat.ForwardRef{ConversationID: 9, Seq: 4, SenderID: 3},
		EditedAt: &at, Recalled: true, RecalledAt: &at, Reactions: []chat.ReactionCount{{Emoji: "👍", Count: 1}}}
	history, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	event, err := chat.EncodeEvent(chat.MessageEvent(m))
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"history": history, "message.new": event} {
		if !strings.Contains(string(b), `"recalled":true`) || !strings.Contains(string(b), `"recalledAt"`) {
			t.Errorf("%s does not say recalled: %s", what, b)
		}
		for _, k := range []string{"replyTo", "forwardedFrom", "editedAt", "body", "msgType", "attachments", "reactions"} {
			if strings.Contains(string(b), `"`+k+`"`) {
				t.Errorf("%s of a recalled message carries %s: %s", what, k, b)
			}
		}
	}
}
