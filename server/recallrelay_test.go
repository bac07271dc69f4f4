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
)

// TestAResumingSessionGetsAMessageRecalledOnAnotherNodeRecalledBeforeTheRecallIsRelayed:
// node B's fan-out saw a message relayed from node A, which is then
// recalled on A while Kafka is down: B has not heard of the recall. A
// persistent session that had not received the message resumes on B. Its
// catch-up carries the message recalled, as PostgreSQL holds it
// (docs/protocol.md, Recall: "in catch-up"), then the recall: never the
// erased text from what B kept in memory.
func TestAResumingSessionGetsAMessageRecalledOnAnotherNodeRecalledBeforeTheRecallIsRelayed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	kafka, k, _ := restartableKafka(t)
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "recall-a"})
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "recall-b"})
	g := mustGroup(t, context.Background(), a, 1, "recall", []int64{2, 3})
	watcher := rawClient(t, b.MQTTAddr(), 2, "recall-2", 5, true)
	phone := rawClient(t, b.MQTTAddr(), 3, "recall-3", 5, false)
	mustSendAs(t, a, g.ID, 1, "hello")
	nextEvent(t, watcher, chat.EventMessageNew, 20*time.Second)
	nextEvent(t, phone, chat.EventMessageNew, 20*time.Second)
	disconnect(t, b, phone, "recall-3")

	mustSendAs(t, a, g.ID, 1, "secret")
	if ev := nextEvent(t, watcher, chat.EventMessageNew, 20*time.Second); ev.Seq != 2 || ev.Body != "secret" {
		t.Fatalf("node B delivered %+v, want seq 2", ev)
	}
	k.Close()
	if r := httpDo(t, a, 1, "DELETE", fmt.Sprintf("/v1/conversations/%d/messages/2", g.ID), nil); r.status != 200 {
		t.Fatalf("recall: %d %s", r.status, r.body)
	}

	phone = rawClient(t, b.MQTTAddr(), 3, "recall-3", 5, false)
	var ev struct {
		Type     string  `json:"type"`
		Seq      int64   `json:"seq"`
		Body     *string `json:"body"`
		Recalled bool    `json:"recalled"`
	}
	pk := nextPublish(t, phone, "the resumed session's first entry", 20*time.Second, func(packets.Packet) bool { return true })
	if err := json.Unmarshal(pk.Payload, &ev); err != nil || ev.Type != chat.EventMessageNew || ev.Seq != 2 {
		t.Fatalf("the resumed session got %s first (%v), want message.new of seq 2", pk.Payload, err)
	}
	if !ev.Recalled || ev.Body != nil {
		t.Fatalf("the resumed session got the recalled message %s, want it recalled and without its body", pk.Payload)
	}
	if next := nextEvent(t, phone, chat.EventMessageRecalled, 20*time.Second); next.Seq != 3 {
		t.Fatalf("then %+v, want the recall, seq 3", next)
	}
}
