package server_test

import (
	"bytes"
	"context"
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
	ctx := context.Background()
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv := mustGroup(t, ctx, srv, 1, "private plans", nil)
	const clientID = "shared-device"

	// The change waits for this lock, so its answer comes after the
	// connection that asked for it is gone.
	lock, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `SELECT 1 FROM conversation WHERE id = $1 FOR UPDATE`, conv.ID); err != nil {
		t.Fatal(err)
	}

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
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
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
