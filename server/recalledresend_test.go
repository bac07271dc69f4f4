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
	t.Parallel()
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

	// A forward (whose answer carries the copied body) recalled since:
	// recalled, no body.
	src := httpDo(t, srv, 1, http.MethodPost, fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
		map[string]any{"clientMsgId": newID(), "body": "source"})
	if src.status != http.StatusCreated {
		t.Fatalf("source: %d %s", src.status, src.body)
	}
	fwd := map[string]any{"clientMsgId": newID(), "body": "", "forward": map[string]int64{"conversationId": g.ID, "seq": 3}}
	if first := httpDo(t, srv, 1, http.MethodPost, fmt.Sprintf("/v1/conversations/%d/messages", g.ID), fwd); first.status != http.StatusCreated {
		t.Fatalf("forward: %d %s", first.status, first.body)
	}
	if r := httpDo(t, srv, 1, http.MethodDelete, fmt.Sprintf("/v1/conversations/%d/messages/4", g.ID), nil); r.status != http.StatusOK {
		t.Fatalf("recall of the forward: %d %s", r.status, r.body)
	}
	r = httpDo(t, srv, 1, http.MethodPost, fmt.Sprintf("/v1/conversations/%d/messages", g.ID), fwd)
	reply.Body = nil
	if err := json.Unmarshal(r.body, &reply); err != nil || r.status != http.StatusOK || reply.Seq != 4 || !reply.Recalled || reply.Body != nil {
		t.Fatalf("HTTP resend of a recalled forward: %d %s (%v), want 200 seq 4 recalled and no body", r.status, r.body, err)
	}
}

// TestAResendOfAnEditWhoseMessageWasRecalledIsAnsweredAsRecalled: a recall
// erases the message's edits too, so a resend of an edit answered its
// erased, empty body; it now says the message was recalled (PUBACK
// recalled=true; HTTP "recalled": true with recalledAt and no body).
func TestAResendOfAnEditWhoseMessageWasRecalledIsAnsweredAsRecalled(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 1, "recalled edit", []int64{2})
	alice := rawClient(t, srv.MQTTAddr(), 1, "alice", 5, true)
	if ack, err := alice.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(newID(), "helo")); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send: %v %#x", err, ack.ReasonCode)
	}
	editID := newID()
	edit := fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"body":"hello"}`, editID)
	ack, err := alice.Publish(changeTopic(g.ID, "edit"), 1, edit)
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "recalled") != "" {
		t.Fatalf("edit: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	if ack, err := alice.Publish(changeTopic(g.ID, "recall"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1}`, newID())); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("recall: %v %#x", err, ack.ReasonCode)
	}
	ack, err = alice.Publish(changeTopic(g.ID, "edit"), 1, edit)
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "2" ||
		userProp(ack.Properties.User, "duplicate") != "true" || userProp(ack.Properties.User, "recalled") != "true" {
		t.Fatalf("MQTT resend of the edit: %v %#x %v, want seq=2 duplicate=true recalled=true", err, ack.ReasonCode, ack.Properties.User)
	}
	r := httpDo(t, srv, 1, http.MethodPatch, fmt.Sprintf("/v1/conversations/%d/messages/1", g.ID),
		map[string]any{"clientMsgId": editID, "body": "hello"})
	var reply struct {
		Seq        int64      `json:"seq"`
		Duplicate  bool       `json:"duplicate"`
		Recalled   bool       `json:"recalled"`
		RecalledAt *time.Time `json:"recalledAt"`
		Body       *string    `json:"body"`
	}
	if err := json.Unmarshal(r.body, &reply); err != nil || r.status != http.StatusOK || reply.Seq != 2 || !reply.Duplicate ||
		!reply.Recalled || reply.RecalledAt == nil || reply.Body != nil {
		t.Fatalf("HTTP resend of the edit: %d %s (%v), want 200 seq 2 duplicate recalled with recalledAt and no body", r.status, r.body, err)
	}
}
