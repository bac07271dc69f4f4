package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestARepliedPhotoVoiceNoteOrFileIsNamedInTheQuoteLiveAndOnCatchUp: a
// photo, a voice note and a file are sent without a caption, then a reply
// to each and to a text. A connected member's live message.new and a
// parked persistent session's catch-up carry, in each reply's replyTo,
// the quoted message's msgType ("image", "audio", "file"; none for the
// text), so a client has something to show for an empty snippet.
func TestARepliedPhotoVoiceNoteOrFileIsNamedInTheQuoteLiveAndOnCatchUp(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "quotes", []int64{2, 3})
	parkSession(t, n.Server, 3, "quote-away", 5, g.ID)
	sender := rawClient(t, n.MQTTAddr(), 1, "quote-sender", 5, true)
	reader := rawClient(t, n.MQTTAddr(), 2, "quote-reader", 5, true)

	publish := func(what string, payload []byte) {
		t.Helper()
		if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, payload); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("send %s: %v %#x %s", what, err, ack.ReasonCode, ack.Properties.ReasonString)
		}
	}
	publish("a photo", attachPayload(newID(), "", n.upload(t, 1, g.ID, "a.png", "image/png", mediatest.PNG(40, 30)).UploadID))
	publish("a voice note", attachPayload(newID(), "", n.upload(t, 1, g.ID, "v.wav", "audio/wav", mediatest.WAV(500)).UploadID))
	publish("a file", attachPayload(newID(), "", n.upload(t, 1, g.ID, "d.pdf", "application/pdf", mediatest.PDF()).UploadID))
	publish("a text", testnode.SendPayload(newID(), "words"))
	want := map[int64]string{1: chat.MsgImage, 2: chat.MsgAudio, 3: chat.MsgFile, 4: ""} // quoted seq: its msgType
	for seq := int64(1); seq <= 4; seq++ {
		publish("a reply", fmt.Appendf(nil, `{"clientMsgId":%q,"body":"re","replyTo":%d}`, newID(), seq))
	}

	// check reads the 4 replies (seqs 5-8) from next, the member's
	// message.new events in turn.
	check := func(who string, next func() []byte) {
		t.Helper()
		got := map[int64]bool{}
		for len(got) < 4 {
			payload := next()
			var ev struct {
				Seq     int64          `json:"seq"`
				ReplyTo *chat.ReplyRef `json:"replyTo"`
			}
			if err := json.Unmarshal(payload, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ReplyTo == nil {
				continue
			}
			got[ev.Seq] = true
			if w := want[ev.ReplyTo.Seq]; ev.ReplyTo.MsgType != w {
				t.Errorf("%s: reply %d quotes %+v, want msgType %q: %s", who, ev.Seq, *ev.ReplyTo, w, payload)
			}
		}
	}
	check("the connected member's live message.new", func() []byte {
		return nextPublish(t, reader, "live message.new", 10*time.Second, isEntryOf(t, g.ID, chat.EventMessageNew)).Payload
	})
	away := rawClient(t, n.MQTTAddr(), 3, "quote-away", 5, false)
	check("the parked session's catch-up", func() []byte {
		return nextPublish(t, away, "caught-up message.new", 10*time.Second, isEntryOf(t, g.ID, chat.EventMessageNew)).Payload
	})
}
