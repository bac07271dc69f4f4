package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAResendOfARecalledMessageIsAnsweredAsRecalled: a message commits,
// its sender recalls it, and a client that never saw the first PUBACK
// resends it. The answer is the duplicate's seq and says the message was
// recalled (PUBACK user property recalled=true; HTTP and RPC
// "recalled": true with recalledAt and no body), not an empty message the
// client would show as sent.
func TestAResendOfARecalledMessageIsAnsweredAsRecalled(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 1, "recalled resend", []int64{2})
	alice := rawClient(t, srv.MQTTAddr(), 1, "alice", 5, true)

	id := newID()
	ack, err := alice.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(id, "oops"))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "recalled") != "" {
		t.Fatalf("send: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	// A resend before the recall is a plain duplicate.
	ack, err = alice.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(id, "oops"))
	if err != nil || userProp(ack.Properties.User, "duplicate") != "true" || userProp(ack.Properties.User, "recalled") != "" {
		t.Fatalf("resend before the recall: %v %v", err, ack.Properties.User)
	}
	ack, err = alice.Publish(changeTopic(g.ID, "recall"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1}`, newID()))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("recall: %v %#x", err, ack.ReasonCode)
	}

	ack, err = alice.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(id, "oops"))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "1" ||
		userProp(ack.Properties.User, "duplicate") != "true" || userProp(ack.Properties.User, "recalled") != "true" {
		t.Fatalf("MQTT resend of a recalled message: %v %#x %v, want seq=1 duplicate=true recalled=true",
			err, ack.ReasonCode, ack.Properties.User)
	}

	r := httpDo(t, srv, 1, http.MethodPost, fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
		map[string]any{"clientMsgId": id, "body": "oops"})
	var reply struct {
		Seq        int64      `json:"seq"`
		Recalled   bool       `json:"recalled"`
		RecalledAt *time.Time `json:"recalledAt"`
		Body       *string    `json:"body"`
	}
	if err := json.Unmarshal(r.body, &reply); err != nil {
		t.Fatalf("HTTP resend: %d %s: %v", r.status, r.body, err)
	}
	if r.status != http.StatusOK || reply.Seq != 1 || !reply.Recalled || reply.RecalledAt == nil || reply.Body != nil {
		t.Fatalf("HTTP resend of a recalled message: %d %s, want 200 seq 1 recalled with recalledAt and no body", r.status, r.body)
	}
}
