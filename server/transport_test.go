package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

func TestWebSocketClientsChatAndForeignOriginsAreRefused(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	url := "ws://" + srv.HTTPAddr() + "/mqtt"
	if _, resp, err := mqtttest.DialWS(url, "http://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: want 403, got %v %v", resp, err)
	}
	dial := func(user int64, id, origin string) *mqtttest.Client {
		conn, _, err := mqtttest.DialWS(url, origin)
		if err != nil {
			t.Fatalf("websocket dial: %v", err)
		}
		c, _, err := mqtttest.DialConn(conn, mqtttest.Options{Version: 5, ClientID: id, Password: testnode.Token(t, user), Clean: true})
		if err != nil {
			t.Fatalf("mqtt over websocket: %v", err)
		}
		t.Cleanup(c.Drop)
		if codes, err := c.Subscribe(testnode.EventsTopic(user)); err != nil || codes[0] >= 0x80 {
			t.Fatalf("subscribe: %v %v", codes, err)
		}
		return c
	}
	browser := dial(2, "browser-2", "http://"+srv.HTTPAddr()) // same origin
	sender := dial(1, "ws-1", "")                             // not a browser
	ack, err := sender.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "over websocket"))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("publish over websocket: 0x%02x %v", ack.ReasonCode, err)
	}
	ev := nextEvent(t, browser, chat.EventMessageNew, 5*time.Second)
	if ev.Body != "over websocket" || ev.Seq != 1 {
		t.Fatalf("got %+v", ev)
	}
}

func TestShutdownAcknowledgesOnlyCommittedSends(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	conv, err := srv.Service.CreateGroup(context.Background(), 1, "shutdown", []int64{2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	var acked sync.Map // clientMsgId -> seq
	var wg sync.WaitGroup
	var count atomic.Int64
	for u := int64(1); u <= 4; u++ {
		c := rawClient(t, srv.MQTTAddr(), u, fmt.Sprintf("sd-%d", u), 5, true)
		wg.Go(func() {
			for {
				id := newID()
				ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(id, "x"))
				if err != nil || ack.ReasonCode >= 0x80 {
					return
				}
				acked.Store(id, userProp(ack.Properties.User, "seq"))
				count.Add(1)
			}
		})
	}
	testkit.WaitFor(t, 10*time.Second, "some traffic", func() bool { return count.Load() > 100 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	wg.Wait()
	pool := openPool(t, url)
	n := 0
	acked.Range(func(k, v any) bool {
		n++
		var seq int64
		err := pool.QueryRow(context.Background(), "SELECT seq FROM message WHERE conversation_id=$1 AND client_msg_id=$2", conv.ID, k).Scan(&seq)
		if err != nil || fmt.Sprint(seq) != v {
			t.Errorf("acked message %v (seq %v) not stored as acked: %v", k, v, err)
		}
		return true
	})
	var last, rows int64
	if err := pool.QueryRow(context.Background(), "SELECT last_seq, (SELECT count(*) FROM message WHERE conversation_id=$1) FROM conversation WHERE id=$1", conv.ID).Scan(&last, &rows); err != nil {
		t.Fatalf("read the conversation after shutdown: %v", err)
	}
	if last != rows {
		t.Fatalf("seq gap after shutdown: last_seq %d, %d rows", last, rows)
	}
	t.Logf("%d sends acknowledged before shutdown, all stored; %d rows", n, rows)
}

func TestLargeGroupMessageNewCarriesNoBody(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LARGE_GROUP": "3"})
	big, err := srv.Service.CreateGroup(context.Background(), 1, "big", []int64{2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	small, err := srv.Service.CreateGroup(context.Background(), 1, "small", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	// A persistent client that is offline gets the replayed form too.
	away := rawClient(t, srv.MQTTAddr(), 2, "away-2", 5, false)
	away.Disconnect()
	sender := rawClient(t, srv.MQTTAddr(), 1, "big-1", 5, true)
	sendN(t, sender, big.ID, 1, "big")
	sendN(t, sender, small.ID, 1, "small")
	live := collectMessages(t, sender, big.ID, 1, 5*time.Second)[0]
	back := rawClient(t, srv.MQTTAddr(), 2, "away-2", 5, false)
	replayed := collectMessages(t, back, big.ID, 1, 5*time.Second)[0]
	for _, ev := range []event{live, replayed} {
		if ev.Body != "" || ev.ClientMsgID != "" || ev.Seq != 1 || ev.SenderID != 1 {
			t.Fatalf("large-group message.new must carry only ids: %+v", ev)
		}
	}
	if ev := collectMessages(t, back, small.ID, 1, 5*time.Second)[0]; ev.Body != "small 0" {
		t.Fatalf("small group message lost its body: %+v", ev)
	}
}

func TestTypingReachesOnlineMembersAtMostOncePerSecond(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	a := rawClient(t, srv.MQTTAddr(), 1, "ty-1", 5, true)
	b := rawClient(t, srv.MQTTAddr(), 2, "ty-2", 4, true)
	topic := fmt.Sprintf("chat/v1/conv/%d/typing", conv.ID)
	for i := 0; i < 10; i++ {
		if _, err := a.Publish(topic, 0, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	ev := nextEvent(t, b, chat.EventTyping, 5*time.Second)
	if ev.UserID != 1 || ev.ConversationID != conv.ID {
		t.Fatalf("typing = %+v", ev)
	}
	// The other nine fell within the same second: nothing more arrives.
	select {
	case pk := <-b.Publishes:
		t.Fatalf("second typing event within a second: %s", pk.Payload)
	case <-time.After(300 * time.Millisecond):
	}
	// The typist does not get its own typing event. (Other events may be
	// there: the member.added of OpenDirect can reach a session that
	// subscribed before the hub routed it.)
	for len(a.Publishes) > 0 {
		pk := <-a.Publishes
		var ev event
		if json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == chat.EventTyping {
			t.Fatalf("typist got %s", pk.Payload)
		}
	}
	// Not stored.
	if n := pgtest.QueryOne[int](t, srv.Pool, "SELECT count(*) FROM outbox WHERE type = 'typing'"); n != 0 {
		t.Fatalf("typing stored %d outbox rows", n)
	}
}

func TestRemovedMemberStopsReceivingAtOnce(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "rm", []int64{2, 3})
	owner := rawClient(t, srv.MQTTAddr(), 1, "rm-1", 5, true)
	leaver := rawClient(t, srv.MQTTAddr(), 3, "rm-3", 5, true)
	sendN(t, owner, conv.ID, 3, "before")
	collectMessages(t, leaver, conv.ID, 3, 5*time.Second)
	if err := srv.Service.RemoveMember(ctx, conv.ID, 1, 3); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, leaver, chat.EventMemberRemoved, 5*time.Second)
	if ev.UserID != 3 || ev.ConversationID != conv.ID {
		t.Fatalf("member.removed = %+v", ev)
	}
	sendN(t, owner, conv.ID, 5, "after")
	collectMessages(t, owner, conv.ID, 8, 5*time.Second)
	noMessagesOf(t, leaver, conv.ID, 300*time.Millisecond, "removed member still receives")
	ack, err := leaver.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "still here?"))
	if err != nil || ack.ReasonCode != 0x87 {
		t.Fatalf("removed member may still send: 0x%02x %v", ack.ReasonCode, err)
	}
}

func TestRPCOverMQTTAnswersOnTheCallersResponseTopic(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	c := rawClient(t, srv.MQTTAddr(), 1, "rpc-1", 5, true)
	if codes, err := c.Subscribe("chat/v1/user/1/rpc/#"); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe rpc: %v %v", codes, err)
	}
	sendN(t, c, conv.ID, 3, "m")
	req := []byte(fmt.Sprintf(`{"conversationId":%d,"afterSeq":1}`, conv.ID))
	ack, err := c.Publish("chat/v1/rpc/history", 1, req, mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/1/rpc/a", CorrelationData: []byte("call-7")})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("rpc publish: 0x%02x %v", ack.ReasonCode, err)
	}
	pk := nextReply(t, c, "RPC reply", 5*time.Second, []byte("call-7"))
	if pk.TopicName != "chat/v1/user/1/rpc/a" {
		t.Fatalf("the reply came on %s, want the response topic chat/v1/user/1/rpc/a", pk.TopicName)
	}
	var reply struct {
		Status   int            `json:"status"`
		Messages []chat.Message `json:"messages"`
	}
	if err := json.Unmarshal(pk.Payload, &reply); err != nil || reply.Status != 200 || len(reply.Messages) != 2 || reply.Messages[0].Seq != 2 {
		t.Fatalf("history reply %s (%v)", pk.Payload, err)
	}
	ack, err = c.Publish("chat/v1/rpc/inbox", 1, []byte(`{}`), mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/2/rpc", CorrelationData: []byte("x")})
	if err != nil || ack.ReasonCode != 0x87 {
		t.Fatalf("response topic in another user's tree: want 0x87, got 0x%02x %v", ack.ReasonCode, err)
	}
	ack, err = c.Publish("chat/v1/rpc/inbox", 1, []byte(`{}`))
	if err != nil || ack.ReasonCode != 0x99 {
		t.Fatalf("rpc without response topic: want 0x99, got 0x%02x %v", ack.ReasonCode, err)
	}
}

func TestHTTPAndMQTTSendsShareOneGaplessSequence(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	listener := rawClient(t, srv.MQTTAddr(), 2, "gapless-2", 4, true)
	mq := rawClient(t, srv.MQTTAddr(), 1, "gapless-1", 5, true)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sendN(t, mq, conv.ID, 100, "mqtt")
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			body := fmt.Sprintf(`{"clientMsgId":%q,"body":"http %d"}`, newID(), i)
			req, _ := http.NewRequest("POST", fmt.Sprintf("http://%s/v1/conversations/%d/messages", srv.HTTPAddr(), conv.ID), bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+testnode.Token(t, 1))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusCreated {
				t.Errorf("http send: %v %v", resp, err)
				return
			}
			resp.Body.Close()
		}
	}()
	wg.Wait()
	got := collectMessages(t, listener, conv.ID, 200, 20*time.Second)
	assertInOrder(t, got, 1)
}

func TestAfterSeqZeroPagesForwardFromTheFirstMessage(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	c := rawClient(t, srv.MQTTAddr(), 1, "fwd", 5, true)
	sendN(t, c, conv.ID, 60, "m")
	get := func(query string) []chat.Message {
		var page struct{ Messages []chat.Message }
		if st := api(t, srv, 2, "GET", fmt.Sprintf("/v1/conversations/%d/messages?%s", conv.ID, query), nil, &page); st != http.StatusOK {
			t.Fatalf("history %s: %d", query, st)
		}
		return page.Messages
	}
	if m := get("afterSeq=0&limit=10"); len(m) != 10 || m[0].Seq != 1 || m[9].Seq != 10 {
		t.Fatalf("afterSeq=0 must start at seq 1: %d messages from %d", len(m), m[0].Seq)
	}
	if m := get("limit=10"); len(m) != 10 || m[0].Seq != 51 || m[9].Seq != 60 {
		t.Fatalf("no cursor must give the newest page: from %d", m[0].Seq)
	}
	if m := get("afterSeq=55"); len(m) != 5 || m[0].Seq != 56 {
		t.Fatalf("afterSeq=55: %d messages", len(m))
	}
}

// TestATypingIndicatorWithAPayloadOtherThanAnEmptyObjectIsRefused: the
// contract's typing payload is {} (docs/protocol.md), and any other
// payload of up to 256 bytes (a draft's text, say) used to be taken as
// an indicator; it is refused as an invalid payload, as other publishes
// are. An empty payload (mosquitto_pub -n) stays an indicator.
func TestATypingIndicatorWithAPayloadOtherThanAnEmptyObjectIsRefused(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	a := rawClient(t, srv.MQTTAddr(), 1, "ty-strict-1", 5, true)
	topic := fmt.Sprintf("chat/v1/conv/%d/typing", conv.ID)
	for _, tc := range []struct {
		payload string
		want    byte
	}{
		{`{}`, 0}, {` { } `, 0}, {``, 0},
		{`{"text":"my secret draft"}`, 0x99}, {`not json`, 0x99}, {`[]`, 0x99}, {`{}{}`, 0x99},
	} {
		ack, err := a.Publish(topic, 1, []byte(tc.payload))
		if err != nil || ack.ReasonCode != tc.want {
			t.Fatalf("typing with %q: PUBACK 0x%02x %v, want 0x%02x", tc.payload, ack.ReasonCode, err, tc.want)
		}
	}
}
