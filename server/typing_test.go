package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
)

// typingUntil reads c's events until the typing event of conversation
// stop and fails on any other typing event before it.
func typingUntil(t *testing.T, c *mqtttest.Client, stop int64, timeout time.Duration) event {
	t.Helper()
	var ev event
	nextPublish(t, c, fmt.Sprintf("the typing event of conversation %d", stop), timeout, func(pk packets.Packet) bool {
		ev = event{}
		if json.Unmarshal(pk.Payload, &ev) != nil || ev.Type != chat.EventTyping {
			return false
		}
		if ev.ConversationID != stop {
			t.Fatalf("typing event before that of conversation %d: %s", stop, pk.Payload)
		}
		return true
	})
	return ev
}

// Behind a load balancer the members of a conversation are connected to
// different nodes: a member typing on node A is seen by a member on node B
// (through Kafka, not stored), once per second as on one node, and by
// nobody else there: not by a user of node B outside the conversation,
// nor by one who blocked the typist in their direct conversation.
func TestTypingOnOneNodeReachesTheMembersOnAnotherAndNobodyElse(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two nodes and Kafka")
	}
	ctx := context.Background()
	a, b := startKafkaPair(t, "ty", nil)
	conv := mustGroup(t, ctx, a, 1, "typing", []int64{2})
	both := mustGroup(t, ctx, a, 1, "sentinel", []int64{2, 3})
	direct := mustDirect(t, ctx, a, 1, 3)
	if code := api(t, b, 3, "PUT", fmt.Sprintf("/v1/me/blocks/%d", 1), nil, nil); code != 200 && code != 204 {
		t.Fatalf("block: %d", code)
	}
	typist := rawClient(t, a.MQTTAddr(), 1, "ty-1", 5, true)
	member := rawClient(t, b.MQTTAddr(), 2, "ty-2", 5, true)
	outsider := rawClient(t, b.MQTTAddr(), 3, "ty-3", 5, true)
	typing := func(conv int64) {
		t.Helper()
		if _, err := typist.Publish(fmt.Sprintf("chat/v1/conv/%d/typing", conv), 0, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}

	// Node B's consumer reads from where the topic ended when it started,
	// so nothing needs to wait for it to join its group.
	for range 5 {
		typing(conv.ID)
	}
	if ev := typingUntil(t, member, conv.ID, 30*time.Second); ev.UserID != 1 {
		t.Fatalf("typing on B = %+v", ev)
	}
	typing(direct.ID) // refused on A: 3 blocked 1
	typing(both.ID)
	// Routed after the first: anything of conv or of the direct
	// conversation would have reached them before it.
	if ev := typingUntil(t, member, both.ID, 15*time.Second); ev.UserID != 1 {
		t.Fatalf("typing on B = %+v", ev)
	}
	if ev := typingUntil(t, outsider, both.ID, 15*time.Second); ev.UserID != 1 {
		t.Fatalf("typing on B = %+v", ev)
	}
	var stored int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'typing'`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d typing events stored in the outbox (%v)", stored, err)
	}
}

// TestATypingIndicatorRepeatedWithinASecondIsRefusedAsTheFirst: the
// per-second typing throttle comes before the membership check, so an
// indicator of the same second as a refused one never reaches it; it must
// still be refused as that one was (not_member, blocked), not answered as
// if it had been let through: PUBACK 0x87 with the same code on v5, the
// PUBACK and an error event on v3.1.1. A member's indicator of the same
// second is still dropped quietly (PUBACK 0x00).
func TestATypingIndicatorRepeatedWithinASecondIsRefusedAsTheFirst(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	const owner, stranger, blocker, blocked = 1, 3, 10, 11
	g := mustGroup(t, ctx, srv, owner, "g", nil).ID
	d := mustDirect(t, ctx, srv, blocker, blocked).ID
	if st := api(t, srv, blocker, "PUT", fmt.Sprintf("/v1/me/blocks/%d", blocked), nil, nil); st != 204 {
		t.Fatalf("block: %d", st)
	}
	for _, c := range []struct {
		who        string
		user, conv int64
		code       string
	}{
		{"never a member", stranger, g, string(chat.CodeNotMember)},
		{"blocked", blocked, d, string(chat.CodeBlocked)},
		{"member", owner, g, ""},
	} {
		v5 := rawClient(t, srv.MQTTAddr(), c.user, fmt.Sprintf("typist-%d-v5", c.user), 5, true)
		v4 := rawClient(t, srv.MQTTAddr(), c.user, fmt.Sprintf("typist-%d-v4", c.user), 4, true)
		topic := fmt.Sprintf("chat/v1/conv/%d/typing", c.conv)
		for i := 1; i <= 3; i++ {
			ack, err := v5.Publish(topic, 1, []byte(`{}`))
			if err != nil {
				t.Fatalf("%s, indicator %d: %v", c.who, i, err)
			}
			want := byte(0x87)
			if c.code == "" {
				want = 0
			}
			if got := userProp(ack.Properties.User, "code"); ack.ReasonCode != want || got != c.code {
				t.Errorf("%s, v5 indicator %d: PUBACK 0x%02x code %q, want 0x%02x %q", c.who, i, ack.ReasonCode, got, want, c.code)
			}
		}
		if c.code == "" {
			continue
		}
		ack, err := v4.Publish(topic, 1, []byte(`{}`))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("%s, v3.1.1 indicator: PUBACK 0x%02x %v", c.who, ack.ReasonCode, err)
		}
		if ev := nextEvent(t, v4, chat.EventError, 10*time.Second); ev.Code != c.code || ev.ConversationID != c.conv {
			t.Errorf("%s, v3.1.1 indicator: error event %+v, want code %q of conversation %d", c.who, ev, c.code, c.conv)
		}
	}
}

// TestATypingIndicatorRepeatedWithinASecondOfARateLimitedOneIsRateLimited:
// the first indicator of a second refused for the user's typing rate
// limit (PUBACK 0x97, code rate_limited, retryAfter) holds back the others
// of its second in that conversation; they are refused as it was, never
// answered 0x00 as if they had gone out.
func TestATypingIndicatorRepeatedWithinASecondOfARateLimitedOneIsRateLimited(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_TYPING_RATE": "0.2", "CHAT_LIMIT_TYPING_BURST": "1"})
	ctx := context.Background()
	first := mustGroup(t, ctx, srv, 1, "first", []int64{2}).ID
	second := mustGroup(t, ctx, srv, 1, "second", []int64{2}).ID
	pc, _ := dialPaho(t, srv.MQTTAddr(), 1, "typist-paho", nil)
	if ack, err := pc.publish1(fmt.Sprintf("chat/v1/conv/%d/typing", first), []byte(`{}`), nil); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("the indicator within the burst: %+v %v", ack, err)
	}
	topic := fmt.Sprintf("chat/v1/conv/%d/typing", second)
	for i := 1; i <= 3; i++ {
		ack, _ := pc.publish1(topic, []byte(`{}`), nil)
		if ack == nil {
			t.Fatalf("indicator %d over the limit: no PUBACK", i)
		}
		// 0.2 tokens a second, the bucket just emptied: a token is back
		// in at most 5 s.
		code, retry := ack.Properties.User.Get("code"), ack.Properties.User.Get("retryAfter")
		if ack.ReasonCode != 0x97 || code != string(chat.CodeRateLimited) || (retry != "5" && retry != "4") {
			t.Errorf("indicator %d over the limit: PUBACK 0x%02x code %q retryAfter %q, want 0x97 rate_limited 4-5", i, ack.ReasonCode, code, retry)
		}
	}
}
