package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

func changeTopic(conv int64, what string) string {
	return fmt.Sprintf("chat/v1/conv/%d/%s", conv, what)
}

// TestEditRecallAndReactOverMQTTAnswerWithTheirSeqAndReachMembersInOrder:
// each change is acknowledged after its commit with its own seq and the
// target's; members receive message.edited, reaction.updated and
// message.recalled in seq order; refusals get their reason code and the
// precise code as a user property (v5), or an error event (3.1.1).
func TestEditRecallAndReactOverMQTTAnswerWithTheirSeqAndReachMembersInOrder(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 1, "lifecycle", []int64{2, 3})
	alice := rawClient(t, srv.MQTTAddr(), 1, "alice", 5, true)
	bob := rawClient(t, srv.MQTTAddr(), 2, "bob", 5, true)
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol", 4, true)

	ack, err := alice.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(newID(), "helo"))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send: %v %#x", err, ack.ReasonCode)
	}
	ack, err = alice.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"body":"hello"}`, newID()))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "2" || userProp(ack.Properties.User, "targetSeq") != "1" {
		t.Fatalf("edit: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	reactID := newID()
	ack, err = bob.Publish(changeTopic(g.ID, "react"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"emoji":"👍","on":true}`, reactID))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "3" {
		t.Fatalf("react: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	// The same reaction again under a new id: it changes nothing.
	ack, err = bob.Publish(changeTopic(g.ID, "react"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"emoji":"👍","on":true}`, newID()))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "unchanged") != "true" || userProp(ack.Properties.User, "seq") != "0" {
		t.Fatalf("react again: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	// A resend of the first reaction: the original seq.
	ack, err = bob.Publish(changeTopic(g.ID, "react"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"emoji":"👍","on":true}`, reactID))
	if err != nil || userProp(ack.Properties.User, "seq") != "3" || userProp(ack.Properties.User, "duplicate") != "true" {
		t.Fatalf("react resend: %v %v", err, ack.Properties.User)
	}
	// Refusals: bob may not edit alice's message; nothing is stored.
	ack, err = bob.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"body":"mine"}`, newID()))
	if err != nil || ack.ReasonCode != 0x87 || userProp(ack.Properties.User, "code") != string(chat.CodeForbidden) {
		t.Fatalf("edit of another's message: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	ack, err = bob.Publish(changeTopic(g.ID, "react"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"emoji":"two words","on":true}`, newID()))
	if err != nil || ack.ReasonCode != 0x99 || userProp(ack.Properties.User, "code") != string(chat.CodeInvalid) {
		t.Fatalf("reaction with a space: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	ack, err = alice.Publish(changeTopic(g.ID, "recall"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1}`, newID()))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "seq") != "4" {
		t.Fatalf("recall: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	ack, err = bob.Publish(changeTopic(g.ID, "react"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"emoji":"🎉","on":true}`, newID()))
	if err != nil || ack.ReasonCode != 0x87 || userProp(ack.Properties.User, "code") != string(chat.CodeGone) {
		t.Fatalf("reaction on a recalled message: %v %#x %v", err, ack.ReasonCode, ack.Properties.User)
	}
	var last int64
	if err := srv.Pool.QueryRow(ctx, `SELECT last_seq FROM conversation WHERE id = $1`, g.ID).Scan(&last); err != nil || last != 4 {
		t.Fatalf("last_seq %d (%v), want 4: refusals and no-ops use no seq", last, err)
	}

	// Carol (3.1.1, online throughout) got every entry in order.
	want := []string{chat.EventMessageNew, chat.EventMessageEdited, chat.EventReactionUpdated, chat.EventMessageRecalled}
	for i, typ := range want {
		ev := nextEvent(t, carol, typ, 5*time.Second)
		if ev.Seq != int64(i+1) {
			t.Fatalf("%s has seq %d, want %d", typ, ev.Seq, i+1)
		}
	}
	// A 3.1.1 refusal is acknowledged and explained by an error event.
	if _, err := carol.Publish(changeTopic(g.ID, "recall"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":4}`, newID())); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, carol, chat.EventError, 5*time.Second); ev.Code != string(chat.CodeNotFound) {
		t.Fatalf("3.1.1 recall of a recall entry: error event %+v", ev)
	}
}
