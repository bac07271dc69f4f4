package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

func watermarksOf(t *testing.T, srv *server.Server, conv, user int64) (read, delivered int64) {
	t.Helper()
	err := srv.Pool.QueryRow(context.Background(), `SELECT last_read_seq, last_delivered_seq FROM member_watermark
		WHERE conversation_id = $1 AND user_id = $2`, conv, user).Scan(&read, &delivered)
	if err != nil {
		t.Fatal(err)
	}
	return read, delivered
}

type seenReply struct {
	SeenBy      int `json:"seenBy"`
	DeliveredTo int `json:"deliveredTo"`
	Members     int `json:"members"`
}

func seenOf(t *testing.T, srv *server.Server, user, conv, seq int64) seenReply {
	t.Helper()
	r := httpDo(t, srv, user, "GET", fmt.Sprintf("/v1/conversations/%d/messages/%d/seen", conv, seq), nil)
	var s seenReply
	if r.status != 200 || json.Unmarshal(r.body, &s) != nil {
		t.Fatalf("seen: %d %s", r.status, r.body)
	}
	return s
}

// TestDeliveredOnPubackThenRead: the delivered watermark moves when the
// recipient's session acknowledges message.new (PUBACK), not when it is
// published to it; the sender then sees delivery.updated, and read.updated
// once the recipient reads, and the seen endpoint, history and inbox agree.
func TestDeliveredOnPubackThenRead(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	// Outbox rows on, as a node with Kafka has them, so the events'
	// rows can be counted below.
	if _, err := srv.Pool.Exec(context.Background(), `SELECT chat_want_outbox()`); err != nil {
		t.Fatal(err)
	}
	sender := rawClient(t, srv.MQTTAddr(), 1, "sender-1", 5, true)
	phone := rawClient(t, srv.MQTTAddr(), 2, "phone-2", 5, true)
	phone.AutoAck = false
	// A round trip after the write orders it before the reader's next look
	// at AutoAck (the PUBACK is handled under the client's lock).
	if ack, err := phone.Publish("chat/v1/noop", 1, []byte(`{}`)); err != nil || ack.ReasonCode != 0x87 {
		t.Fatalf("noop publish: %v 0x%02x", err, ack.ReasonCode)
	}
	// A clean session starts "now": wait until it has read where now is.
	sessionLoaded(t, srv, "phone-2")

	sendN(t, sender, conv.ID, 1, "hello")
	var pk packets.Packet
	select {
	case pk = <-phone.Publishes:
	case <-time.After(5 * time.Second):
		t.Fatal("message.new not published to the recipient")
	}
	var ev event
	if json.Unmarshal(pk.Payload, &ev) != nil || ev.Type != chat.EventMessageNew || ev.Seq != 1 {
		t.Fatalf("recipient got %s", pk.Payload)
	}
	// Published, not acknowledged: not delivered.
	time.Sleep(300 * time.Millisecond)
	if _, d := watermarksOf(t, srv, conv.ID, 2); d != 0 {
		t.Fatalf("delivered watermark %d before the PUBACK", d)
	}
	if s := seenOf(t, srv, 1, conv.ID, 1); s != (seenReply{SeenBy: 0, DeliveredTo: 0, Members: 1}) {
		t.Fatalf("seen before the PUBACK: %+v", s)
	}

	if err := phone.Ack(pk.PacketID); err != nil {
		t.Fatal(err)
	}
	got := nextEvent(t, sender, chat.EventDeliveryUpdated, 5*time.Second)
	if got.UserID != 2 || got.ConversationID != conv.ID || got.Seq != 1 || got.SenderID != 1 {
		t.Fatalf("delivery.updated = %+v", got)
	}
	if r, d := watermarksOf(t, srv, conv.ID, 2); d != 1 || r != 0 {
		t.Fatalf("after the PUBACK: read %d delivered %d", r, d)
	}
	if s := seenOf(t, srv, 1, conv.ID, 1); s != (seenReply{SeenBy: 0, DeliveredTo: 1, Members: 1}) {
		t.Fatalf("seen after the PUBACK: %+v", s)
	}
	var hist struct {
		Messages     []json.RawMessage `json:"messages"`
		DeliveredSeq int64             `json:"deliveredSeq"`
		ReadSeq      int64             `json:"readSeq"`
	}
	r := httpDo(t, srv, 1, "GET", fmt.Sprintf("/v1/conversations/%d/messages", conv.ID), nil)
	if json.Unmarshal(r.body, &hist) != nil || len(hist.Messages) != 1 || hist.DeliveredSeq != 1 || hist.ReadSeq != 0 {
		t.Fatalf("history: %s", r.body)
	}

	// Reading: the PUBACK of the receipt comes after its commit.
	ack, err := phone.Publish(testnode.ReadTopic(conv.ID), 1, []byte(`{"seq":1}`))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("read receipt: %v 0x%02x", err, ack.ReasonCode)
	}
	if r, _ := watermarksOf(t, srv, conv.ID, 2); r != 1 {
		t.Fatalf("read watermark %d right after the receipt's PUBACK", r)
	}
	got = nextEvent(t, sender, chat.EventReadUpdated, 5*time.Second)
	if got.UserID != 2 || got.Seq != 1 {
		t.Fatalf("read.updated = %+v", got)
	}
	if s := seenOf(t, srv, 1, conv.ID, 1); s != (seenReply{SeenBy: 1, DeliveredTo: 1, Members: 1}) {
		t.Fatalf("seen after reading: %+v", s)
	}
	var inbox struct {
		Conversations []struct {
			ID           int64 `json:"id"`
			DeliveredSeq int64 `json:"deliveredSeq"`
			ReadSeq      int64 `json:"readSeq"`
		} `json:"conversations"`
	}
	r = httpDo(t, srv, 1, "GET", "/v1/inbox", nil)
	if json.Unmarshal(r.body, &inbox) != nil || len(inbox.Conversations) != 1 || inbox.Conversations[0].DeliveredSeq != 1 || inbox.Conversations[0].ReadSeq != 1 {
		t.Fatalf("inbox: %s", r.body)
	}
	// The recipient is not told about its own delivery.
	for {
		select {
		case pk := <-phone.Publishes:
			if json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventDeliveryUpdated {
				t.Fatalf("recipient got its own delivery.updated: %s", pk.Payload)
			}
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	if rows := pgtest.QueryOne[int](t, srv.Pool, `SELECT count(*) FROM outbox WHERE type = 'delivery.updated'`); rows != 1 {
		t.Fatalf("%d delivery.updated outbox rows, want 1 (the sender's own copy is not a delivery)", rows)
	}
}

// TestMetricsExposeLimitsReceiptsAndPresence: the metrics are on
// the node's registry and move.
func TestMetricsExposeLimitsReceiptsAndPresence(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, map[string]string{"CHAT_LIMIT_SEND_RATE": "0.01", "CHAT_LIMIT_SEND_BURST": "1", "CHAT_PRESENCE_PUSH": "true"})
	a := rawClient(t, srv.MQTTAddr(), 1, "m1", 5, true)
	b := rawClient(t, srv.MQTTAddr(), 2, "m2", 4, true)
	sessionLoaded(t, srv, "m2")
	sendN(t, a, conv.ID, 1, "m")
	if ack, _ := a.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "over")); ack.ReasonCode != 0x97 {
		t.Fatalf("second send: 0x%02x, want 0x97", ack.ReasonCode)
	}
	collectMessages(t, b, conv.ID, 1, 5*time.Second)
	if _, err := b.Publish(testnode.ReadTopic(conv.ID), 1, []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	// The receipts' batches and the tracker's round that tells user 1
	// that user 2 came online each run on their own goroutine.
	testkit.WaitFor(t, 10*time.Second, "metrics", func() bool {
		m = scrape(t, srv.HTTPAddr())
		return m[`chat_receipt_flushes_total{kind="read"}`] >= 1 && m[`chat_receipt_flushes_total{kind="delivered"}`] >= 1 &&
			m[`chat_presence_events_total{origin="local"}`] >= 1
	})
	checks := map[string]func(float64) bool{
		`chat_rate_limited_total{kind="send"}`:       func(v float64) bool { return v == 1 },
		`chat_presence_online_users`:                 func(v float64) bool { return v == 2 },
		`chat_rate_limiter_redis_fallback`:           func(v float64) bool { return v == 0 },
		`chat_presence_events_total{origin="local"}`: func(v float64) bool { return v >= 1 },
	}
	for name, ok := range checks {
		if v, present := m[name]; !present || !ok(v) {
			t.Errorf("%s = %v (present %v)", name, v, present)
		}
	}
}

// sessionLoaded waits until clientID's delivery session has read its
// starting positions: a clean session gets what commits after that.
func sessionLoaded(t *testing.T, srv *server.Server, clientID string) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, "session of "+clientID, func() bool { return srv.Hub.Session(clientID) != nil })
	testkit.Receive(t, srv.Hub.Session(clientID).Loaded(), 10*time.Second, fmt.Sprintf("session of %s did not load", clientID))
}
