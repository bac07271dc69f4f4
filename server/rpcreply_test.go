package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// An RPC request is answered on the connection that made it. User 1 asks
// for a change of their group and disconnects before the answer is ready
// (the group row is held locked); user 2 then connects with the client id
// user 1 let go of. The answer, which describes user 1's group, must not
// reach user 2's connection: it is for a connection that no longer exists.
func TestAnRPCReplyOfAClosedConnectionDoesNotReachTheNextUserOfItsClientID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv := mustGroup(t, ctx, srv, 1, "private plans", nil)
	const clientID = "shared-device"

	// The change waits for this lock, so its answer comes after the
	// connection that asked for it is gone.
	release := pgtest.LockConversation(t, ctx, srv.Pool, conv.ID)

	owner := rawClient(t, srv.MQTTAddr(), 1, clientID, 5, true)
	req := []byte(fmt.Sprintf(`{"conversationId":%d,"title":"renamed in secret"}`, conv.ID))
	ack, err := owner.Publish("chat/v1/rpc/conversation.update", 1, req,
		mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/1/rpc", CorrelationData: []byte("owner")})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("rpc publish: 0x%02x %v", ack.ReasonCode, err)
	}
	disconnect(t, srv, owner, clientID)
	testkit.WaitFor(t, 5*time.Second, "the clean session of "+clientID+" dropped", func() bool {
		var n int
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM chat_session WHERE client_id = $1`, clientID).Scan(&n)
		return n == 0
	})

	other := rawClient(t, srv.MQTTAddr(), 2, clientID, 5, true)
	release()
	testkit.WaitFor(t, 10*time.Second, "the owner's change committed", func() bool {
		var title string
		_ = srv.Pool.QueryRow(ctx, `SELECT title FROM conversation WHERE id = $1`, conv.ID).Scan(&title)
		return title == "renamed in secret"
	})
	// The owner's answer is queued right after its commit; user 2's own
	// request is answered after it on the same connection, so whatever
	// was sent there before that answer has arrived by then.
	ack, err = other.Publish("chat/v1/rpc/me.get", 1, []byte(`{}`),
		mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/2/rpc", CorrelationData: []byte("other")})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("rpc publish of user 2: 0x%02x %v", ack.ReasonCode, err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case pk := <-other.Publishes:
			if !strings.HasPrefix(pk.TopicName, "chat/v1/user/2/") || bytes.Contains(pk.Payload, []byte("renamed in secret")) {
				t.Fatalf("user 2 received %s on %s: the answer to user 1's request on the connection before theirs", pk.Payload, pk.TopicName)
			}
			if bytes.Equal(pk.Properties.CorrelationData, []byte("other")) {
				return
			}
		case <-deadline:
			t.Fatal("no answer to user 2's own request")
		}
	}
}

// An RPC request that finds the node's request workers all busy and their
// queue full is refused at once, and says when to ask again as a rate
// limit does: PUBACK 0x97 with the user properties code=rate_limited and
// retryAfter, and a reply whose error.retryAfter gives the same seconds.
func TestAnRPCRefusedForBusyWorkersSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_API_RATE": "100000", "CHAT_LIMIT_API_BURST": "100000"})
	// Nine users, each with a group of their own whose every update waits
	// for a lock: their requests, asked in turn, fill the workers (8) and
	// their queue (256) before any one user's share of it (32).
	const users = 9
	var clients []*mqtttest.Client
	var reqs [][]byte
	for u := int64(1); u <= users; u++ {
		conv := mustGroup(t, ctx, srv, u, "busy", nil)
		pgtest.LockConversation(t, ctx, srv.Pool, conv.ID)
		clients = append(clients, rawClient(t, srv.MQTTAddr(), u, fmt.Sprint("busy-rpc-", u), 5, true))
		reqs = append(reqs, []byte(fmt.Sprintf(`{"conversationId":%d,"title":"again"}`, conv.ID)))
	}
	var c *mqtttest.Client
	var refused []byte // the correlation data of the first request refused
	for i := 0; i < 400 && refused == nil; i++ {
		corr := []byte(fmt.Sprintf("r%d", i))
		c = clients[i%users]
		ack, err := c.Publish("chat/v1/rpc/conversation.update", 1, reqs[i%users],
			mqtttest.PublishOpts{ResponseTopic: fmt.Sprintf("chat/v1/user/%d/rpc", i%users+1), CorrelationData: corr})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		switch ack.ReasonCode {
		case 0:
		case 0x97:
			if code, s := userProp(ack.Properties.User, "code"), userProp(ack.Properties.User, "retryAfter"); code != "rate_limited" || s != "1" {
				t.Fatalf("PUBACK 0x97 of a request refused for busy workers: user properties %+v, want code rate_limited and retryAfter 1", ack.Properties.User)
			}
			refused = corr
		default:
			t.Fatalf("request %d: PUBACK 0x%02x", i, ack.ReasonCode)
		}
	}
	if refused == nil {
		t.Fatal("400 requests waiting for a lock, none refused")
	}
	pk := nextReply(t, c, "reply to the refused request", 10*time.Second, refused)
	var reply struct {
		Status int `json:"status"`
		Error  struct {
			Code       string `json:"code"`
			RetryAfter int64  `json:"retryAfter"`
		} `json:"error"`
	}
	if err := json.Unmarshal(pk.Payload, &reply); err != nil || reply.Status != 503 || reply.Error.Code != "unavailable" || reply.Error.RetryAfter != 1 {
		t.Fatalf("reply to the refused request: %s (%v), want status 503, code unavailable, retryAfter 1", pk.Payload, err)
	}
}

// One user's requests take at most their share of the node's request
// queue (an eighth of it: 32): a burst of requests that wait (here for a
// locked row) is refused past it, and another user's request is still
// taken and answered, not refused for a queue the first filled.
func TestOneUsersWaitingRPCRequestsLeaveRoomForAnotherUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_API_RATE": "100000", "CHAT_LIMIT_API_BURST": "100000"})
	conv := mustGroup(t, ctx, srv, 1, "busy", nil)
	release := pgtest.LockConversation(t, ctx, srv.Pool, conv.ID)
	flood := rawClient(t, srv.MQTTAddr(), 1, "flooding-rpc", 5, true)
	req := []byte(fmt.Sprintf(`{"conversationId":%d,"title":"again"}`, conv.ID))
	taken := 0
	for i := 0; i < 400; i++ {
		ack, err := flood.Publish("chat/v1/rpc/conversation.update", 1, req,
			mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/1/rpc", CorrelationData: []byte(fmt.Sprint("f", i))})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if ack.ReasonCode == 0x97 {
			break
		}
		if ack.ReasonCode != 0 {
			t.Fatalf("request %d: PUBACK 0x%02x", i, ack.ReasonCode)
		}
		taken++
	}
	other := rawClient(t, srv.MQTTAddr(), 2, "patient-rpc", 5, true)
	ack, err := other.Publish("chat/v1/rpc/me.get", 1, []byte(`{}`),
		mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/2/rpc", CorrelationData: []byte("other")})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("another user's request while %d of the first user's wait: PUBACK 0x%02x %v, want 0x00 (taken)", taken, ack.ReasonCode, err)
	}
	if taken > 32 {
		t.Fatalf("%d requests of one user waiting for a lock taken, want at most 32 (an eighth of the queue)", taken)
	}
	release()
	pk := nextReply(t, other, "the answer to the other user's request", 20*time.Second, []byte("other"))
	var reply struct {
		Status int `json:"status"`
	}
	if err := json.Unmarshal(pk.Payload, &reply); err != nil || reply.Status != 200 {
		t.Fatalf("the other user's reply: %s (%v), want status 200", pk.Payload, err)
	}
}

// One user's requests run on at most half of the node's request workers:
// a burst of theirs that waits (a locked row, each until send_timeout)
// leaves the other half to everyone else, whose requests are answered at
// once instead of after the burst's turn.
func TestOneUsersWaitingRPCRequestsDoNotHoldUpAnotherUsersAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_API_RATE": "100000", "CHAT_LIMIT_API_BURST": "100000"})
	conv := mustGroup(t, ctx, srv, 1, "busy", nil)
	pgtest.LockConversation(t, ctx, srv.Pool, conv.ID)
	flood := rawClient(t, srv.MQTTAddr(), 1, "flooding-rpc", 5, true)
	req := []byte(fmt.Sprintf(`{"conversationId":%d,"title":"again"}`, conv.ID))
	for i := 0; i < 32; i++ {
		ack, err := flood.Publish("chat/v1/rpc/conversation.update", 1, req,
			mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/1/rpc", CorrelationData: []byte(fmt.Sprint("f", i))})
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("request %d: PUBACK 0x%02x %v", i, ack.ReasonCode, err)
		}
	}
	other := rawClient(t, srv.MQTTAddr(), 2, "patient-rpc", 5, true)
	asked := time.Now()
	if ack, err := other.Publish("chat/v1/rpc/me.get", 1, []byte(`{}`),
		mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/2/rpc", CorrelationData: []byte("other")}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("another user's request: PUBACK 0x%02x %v", ack.ReasonCode, err)
	}
	// Well under send_timeout (5 s), the wait of each of the first user's.
	nextReply(t, other, "the answer to another user's request while the first user's 32 wait", 3*time.Second, []byte("other"))
	t.Logf("answered in %v", time.Since(asked).Round(time.Millisecond))
}

// Two users whose requests wait (each on a row of their own, locked) run
// on half of the node's request workers each: together they held all
// eight, and a third user's single request started only once one of
// theirs ended, at send_timeout. A worker is now kept for a user with no
// request running: the third user's request is answered while theirs
// still wait, before any of them.
func TestTwoUsersWaitingRPCRequestsLeaveAWorkerForAThirdUsersRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_API_RATE": "100000", "CHAT_LIMIT_API_BURST": "100000",
		"CHAT_SEND_TIMEOUT": "5s"})
	var heavy []*mqtttest.Client
	for u := int64(1); u <= 2; u++ {
		conv := mustGroup(t, ctx, srv, u, "busy", nil)
		pgtest.LockConversation(t, ctx, srv.Pool, conv.ID)
		c := rawClient(t, srv.MQTTAddr(), u, fmt.Sprint("heavy-rpc-", u), 5, true)
		req := []byte(fmt.Sprintf(`{"conversationId":%d,"title":"again"}`, conv.ID))
		for i := range 8 {
			ack, err := c.Publish("chat/v1/rpc/conversation.update", 1, req,
				mqtttest.PublishOpts{ResponseTopic: fmt.Sprintf("chat/v1/user/%d/rpc", u), CorrelationData: []byte(fmt.Sprint("h", i))})
			if err != nil || ack.ReasonCode != 0 {
				t.Fatalf("user %d request %d: PUBACK 0x%02x %v", u, i, ack.ReasonCode, err)
			}
		}
		heavy = append(heavy, c)
	}
	// The workers the two users may take are taken: their requests that
	// wait for the locks stop growing in number.
	waiting := func() int {
		var n int
		if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	last, stable := -1, 0
	testkit.WaitFor(t, 20*time.Second, "the two users' requests to take the workers", func() bool {
		n := waiting()
		if n >= 7 && n == last {
			stable++
		} else {
			stable = 0
		}
		last = n
		time.Sleep(50 * time.Millisecond)
		return stable >= 5
	})
	lone := rawClient(t, srv.MQTTAddr(), 3, "lone-rpc", 5, true)
	if ack, err := lone.Publish("chat/v1/rpc/me.get", 1, []byte(`{}`),
		mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/3/rpc", CorrelationData: []byte("lone")}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("the third user's request: PUBACK 0x%02x %v", ack.ReasonCode, err)
	}
	nextReply(t, lone, "the answer to the third user's request", 30*time.Second, []byte("lone"))
	for i, c := range heavy {
		select {
		case pk := <-c.Publishes:
			t.Fatalf("user %d's request %s was answered (%s) before the third user's: the third user's waited for a worker the two users held",
				i+1, pk.Properties.CorrelationData, pk.Payload)
		default:
		}
	}
	t.Logf("%d of the two users' requests were running", last)
}
