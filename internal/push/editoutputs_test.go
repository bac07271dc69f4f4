package push_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAnUpdateGoesToTheFCMAndAPNsSenderSilentWithTheNewTextUnderTheTagWithoutACollapseKey:
// with previews, bob's FCM and APNs devices were handed a notification
// previewing "secret"; the message is edited to "oops": each device's
// sender gets an update request (the webhook, and a Kafka record whose
// notification header says "update") naming the notification's tag,
// carrying the message's seq, the new text and the badge, and nothing a
// sender would show as an alert of its own (no title, count or sender).
// It has no collapse key: under the notification's it would replace that
// notification where a push service still holds it for an offline device.
func TestAnUpdateGoesToTheFCMAndAPNsSenderSilentWithTheNewTextUnderTheTagWithoutACollapseKey(t *testing.T) {
	t.Parallel()
	kc, snd, outputs := startOutputs(t, 1)
	r := newRig(t)
	r.start(func(c *push.Config) { outputs(c); c.Preview = true })
	fcm := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token", AppID: "com.example.chat"})
	apns := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "apns", Token: "abcdef0123", AppID: "com.example.chat"})
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "secret")
	testkit.WaitFor(t, 5*time.Second, "the notification's two requests", func() bool { return len(snd.got()) >= 2 })
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
	r.edit(conv, 1, seq, "oops")
	testkit.WaitFor(t, 5*time.Second, "the update's two requests", func() bool { return len(snd.got()) >= 4 })

	shown := map[int64]push.Request{}
	updates := map[int64]push.Request{}
	for _, q := range snd.got() {
		switch q.Notification.Type {
		case push.TypeMessage:
			shown[q.Device.ID] = q
		case push.TypeUpdate:
			updates[q.Device.ID] = q
		}
	}
	for _, dev := range []int64{fcm, apns} {
		msg, up := shown[dev], updates[dev]
		if msg.Notification.Body != "secret" {
			t.Fatalf("device %d: notification %+v, want the preview of %q", dev, msg, "secret")
		}
		n := up.Notification
		if n.Type != push.TypeUpdate || n.ConversationID != conv || n.Seq != seq || n.Body != "oops" || n.UserID != 2 ||
			n.Badge != msg.Notification.Badge || n.Badge != 1 || up.Device.ID != dev || up.UserID != 2 ||
			up.Tag == "" || up.Tag != msg.Tag || msg.CollapseKey != msg.Tag || up.CollapseKey != "" || up.ID == msg.ID {
			t.Errorf("device %d: update request %+v, want %q for seq %d, badge 1, naming the notification's tag and no collapse key (%+v)", dev, up, "oops", seq, msg)
		}
		if n.Title != "" || n.Count != 0 || n.SenderID != 0 || len(n.Seqs) != 0 {
			t.Errorf("device %d: update request %+v carries what a sender shows as an alert", dev, up)
		}
	}

	recs, err := kafkatest.ReadPartition(context.Background(), kc.ListenAddrs()[0], "chat.push", 0)
	if err != nil {
		t.Fatal(err)
	}
	kafkaUpdates := 0
	for _, rec := range recs {
		var q push.Request
		if err := json.Unmarshal(rec.Value, &q); err != nil {
			t.Fatal(err)
		}
		if h := kafkatest.Header(rec, "notification"); h != q.Notification.Type {
			t.Errorf("record of a %q has the notification header %q", q.Notification.Type, h)
		}
		if q.Notification.Type == push.TypeUpdate {
			kafkaUpdates++
			if q.Notification.Body != "oops" || q.Tag != updates[q.Device.ID].Tag || q.CollapseKey != "" {
				t.Errorf("Kafka update record %+v, want the webhook's %+v", q, updates[q.Device.ID])
			}
		}
	}
	if kafkaUpdates != 2 {
		t.Errorf("chat.push has %d update records, want one per device", kafkaUpdates)
	}
}
