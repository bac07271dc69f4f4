package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAnMQTTEditClearsTheTextOfAPhotoAndMembersCatchUpOnIt: over MQTT as
// over HTTP, an edit may clear the text of a message with attachments
// (the new body obeys the send rules, and a send with attachments may have
// none): PUBACK 0x00, message.edited with "body":"" to a connected member,
// and the same event to a member's persistent session replayed on
// reconnecting. A text-only message's edit to nothing is refused (0x99
// invalid).
func TestAnMQTTEditClearsTheTextOfAPhotoAndMembersCatchUpOnIt(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, n.Server, 1, "photos", []int64{2, 3})
	sender := rawClient(t, n.MQTTAddr(), 1, "caption-sender", 5, true)
	reader := rawClient(t, n.MQTTAddr(), 2, "caption-reader", 5, true)
	away := rawClient(t, n.MQTTAddr(), 3, "caption-away", 5, false)

	up := n.upload(t, 1, g.ID, "a.jpg", "image/jpeg", mediatest.JPEG(40, 30))
	if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, attachPayload(newID(), "the view", up.UploadID)); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send with a photo: %v %#x", err, ack.ReasonCode)
	}
	if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(newID(), "words")); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send text: %v %#x", err, ack.ReasonCode)
	}
	// The away member acknowledged both and goes offline, its session kept.
	nextAttachEvent(t, away, chat.EventMessageNew)
	nextAttachEvent(t, away, chat.EventMessageNew)
	away.Drop()
	testkit.WaitFor(t, 5*time.Second, "the away member offline", func() bool { return n.Hub.Session("caption-away") == nil })

	ack, err := sender.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"body":""}`, newID()))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "3" {
		t.Fatalf("edit of the photo's text to empty: %v %#x %v %s", err, ack.ReasonCode, ack.Properties.User, ack.Properties.ReasonString)
	}
	ack, err = sender.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":2,"body":""}`, newID()))
	if err != nil || ack.ReasonCode != 0x99 || userProp(ack.Properties.User, "code") != string(chat.CodeInvalid) {
		t.Fatalf("edit of a text message to empty: %v %#x %v, want 0x99 invalid", err, ack.ReasonCode, ack.Properties.User)
	}

	emptyEdit := func(who string, body []byte) {
		t.Helper()
		var ev struct {
			Type      string
			Seq       int64
			TargetSeq int64
			Body      *string
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Seq != 3 || ev.TargetSeq != 1 || ev.Body == nil || *ev.Body != "" {
			t.Fatalf("%s got message.edited %s, want seq 3 of target 1 with \"body\":\"\"", who, body)
		}
	}
	var live []byte
	nextPublish(t, reader, "message.edited", 10*time.Second, func(pk packets.Packet) bool {
		live = pk.Payload
		return eventType(pk.Payload) == chat.EventMessageEdited
	})
	emptyEdit("the connected member", live)

	back := rawClient(t, n.MQTTAddr(), 3, "caption-away", 5, false)
	var replayed []byte
	nextPublish(t, back, "replayed message.edited", 10*time.Second, func(pk packets.Packet) bool {
		replayed = pk.Payload
		return eventType(pk.Payload) == chat.EventMessageEdited
	})
	emptyEdit("the member catching up", replayed)
}

func eventType(payload []byte) string {
	var ev struct{ Type string }
	_ = json.Unmarshal(payload, &ev)
	return ev.Type
}

// TestAnMQTTEditWithoutABodyIsRefused: an edit publish that leaves body
// out is 0x99 invalid, not read as clearing the text of the message.
func TestAnMQTTEditWithoutABodyIsRefused(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "photos", []int64{2})
	sender := rawClient(t, n.MQTTAddr(), 1, "nobody-sender", 5, true)
	up := n.upload(t, 1, g.ID, "a.jpg", "image/jpeg", mediatest.JPEG(40, 30))
	if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, attachPayload(newID(), "the view", up.UploadID)); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send with a photo: %v %#x", err, ack.ReasonCode)
	}
	ack, err := sender.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1}`, newID()))
	if err != nil || ack.ReasonCode != 0x99 || userProp(ack.Properties.User, "code") != string(chat.CodeInvalid) {
		t.Fatalf("edit without a body: %v %#x %v, want 0x99 invalid", err, ack.ReasonCode, ack.Properties.User)
	}
}
