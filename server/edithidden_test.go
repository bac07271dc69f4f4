package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// editEntry is what the tests below read of a message.edited or of an
// edit entry of history: bodyHidden as sent (nil: absent).
type editEntry struct {
	Type       string
	Kind       string
	Seq        int64
	TargetSeq  int64
	Body       *string
	BodyHidden *bool `json:"bodyHidden"`
}

func (e editEntry) String() string {
	b, h := "<none>", "<absent>"
	if e.Body != nil {
		b = fmt.Sprintf("%q", *e.Body)
	}
	if e.BodyHidden != nil {
		h = fmt.Sprint(*e.BodyHidden)
	}
	return fmt.Sprintf("seq %d of target %d, body %s, bodyHidden %s", e.Seq, e.TargetSeq, b, h)
}

// TestAnEditHiddenFromALateMemberIsMarkedBodyHiddenAndAClearedCaptionIsNot:
// in a group whose history is "joined", a member added later gets the
// edit of a message from before their join with "body":"" and
// "bodyHidden":true, live, in catch-up and in history, while the edit
// that cleared the text of a photo sent after their join comes with
// "body":"" and no marker: the two are told apart. The members who may
// read the edit get its body and no marker.
func TestAnEditHiddenFromALateMemberIsMarkedBodyHiddenAndAClearedCaptionIsNot(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, n.Server, 1, "photos", []int64{2}) // history "joined", the default
	sender := rawClient(t, n.MQTTAddr(), 1, "hidden-sender", 5, true)
	founder := rawClient(t, n.MQTTAddr(), 2, "hidden-founder", 5, true)
	sendPhoto := func(text string) {
		t.Helper()
		up := n.upload(t, 1, g.ID, "a.jpg", "image/jpeg", mediatest.JPEG(40, 30))
		if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, attachPayload(newID(), text, up.UploadID)); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("send a photo: %v %#x", err, ack.ReasonCode)
		}
	}
	sendPhoto("before") // seq 1
	for _, u := range []int64{3, 4} {
		if _, _, err := n.Service.AddMember(ctx, g.ID, 1, u); err != nil { // seqs 2 and 3
			t.Fatal(err)
		}
	}
	late := rawClient(t, n.MQTTAddr(), 3, "hidden-late", 5, true)
	away := rawClient(t, n.MQTTAddr(), 4, "hidden-away", 5, false)
	sendPhoto("after") // seq 4
	nextAttachEvent(t, late, "message.new")
	nextAttachEvent(t, away, "message.new")
	away.Drop() // its session kept: it catches up on the edits
	testkit.WaitFor(t, 5*time.Second, "the away member offline", func() bool { return n.Hub.Session("hidden-away") == nil })

	for _, e := range []struct {
		target int64
		body   string
	}{{1, "secret"}, {4, ""}} { // seqs 5 and 6
		ack, err := sender.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":%d,"body":%q}`, newID(), e.target, e.body))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("edit of seq %d to %q: %v %#x %s", e.target, e.body, err, ack.ReasonCode, ack.Properties.ReasonString)
		}
	}

	// check checks what who got of edit 5 (of the message from before
	// the join) and edit 6 (the cleared caption).
	check := func(who string, hidden, cleared editEntry, wantHidden bool) {
		t.Helper()
		if wantHidden {
			if hidden.Body == nil || *hidden.Body != "" || hidden.BodyHidden == nil || !*hidden.BodyHidden {
				t.Errorf("%s, added after seq 1, got its edit as %v, want body \"\" and bodyHidden true", who, hidden)
			}
		} else if hidden.Body == nil || *hidden.Body != "secret" || hidden.BodyHidden != nil {
			t.Errorf("%s got the edit of seq 1 as %v, want body \"secret\" and no bodyHidden", who, hidden)
		}
		if cleared.Body == nil || *cleared.Body != "" || cleared.BodyHidden != nil {
			t.Errorf("%s got the edit clearing the caption of seq 4 as %v, want body \"\" and no bodyHidden", who, cleared)
		}
	}
	check("late member 3, live", nextEdit(t, late, 5), nextEdit(t, late, 6), true)
	check("founder 2, live", nextEdit(t, founder, 5), nextEdit(t, founder, 6), false)
	back := rawClient(t, n.MQTTAddr(), 4, "hidden-away", 5, false)
	check("late member 4, catching up", nextEdit(t, back, 5), nextEdit(t, back, 6), true)

	historyCheck := func(who string, body []byte, wantHidden bool) {
		t.Helper()
		var page struct{ Messages []editEntry }
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		bySeq := map[int64]editEntry{}
		for _, m := range page.Messages {
			bySeq[m.Seq] = m
		}
		if bySeq[5].Kind != "edit" || bySeq[6].Kind != "edit" {
			t.Fatalf("%s: %s, want edits at seqs 5 and 6", who, body)
		}
		check(who, bySeq[5], bySeq[6], wantHidden)
	}
	for _, user := range []int64{3, 2} {
		r := n.call(t, user, "GET", fmt.Sprintf("/v1/conversations/%d/messages?afterSeq=0", g.ID), nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("history of user %d: %d %s", user, r.status, r.body)
		}
		historyCheck(fmt.Sprintf("user %d in HTTP history", user), r.body, user == 3)
	}
	if codes, err := late.Subscribe("chat/v1/user/3/rpc/#"); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe rpc: %v %v", codes, err)
	}
	ack, err := late.Publish("chat/v1/rpc/history", 1, fmt.Appendf(nil, `{"conversationId":%d,"afterSeq":0}`, g.ID),
		mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/3/rpc/h", CorrelationData: []byte("history")})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("rpc history: %#x %v", ack.ReasonCode, err)
	}
	historyCheck("user 3 in RPC history", nextReply(t, late, "RPC history", 10*time.Second, []byte("history")).Payload, true)
}

// nextEdit waits for the message.edited of seq on a raw client, skipping
// the other publishes.
func nextEdit(t *testing.T, c *mqtttest.Client, seq int64) editEntry {
	t.Helper()
	var e editEntry
	nextPublish(t, c, fmt.Sprintf("message.edited %d", seq), 15*time.Second, func(pk packets.Packet) bool {
		e = editEntry{}
		return json.Unmarshal(pk.Payload, &e) == nil && e.Type == "message.edited" && e.Seq == seq
	})
	return e
}
