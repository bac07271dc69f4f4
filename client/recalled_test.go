package client_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/google/uuid"
)

// TestASendRecalledBeforeItsLostPUBACKIsReportedRecalled: a message
// commits but its PUBACK is lost with the connection; before the client
// re-publishes it, its sender recalls it (from another device). chatd
// answers the re-publish as a duplicate of a recalled message: Commit
// reports the original seq and Recalled, so that the app does not show
// the message as sent.
func TestASendRecalledBeforeItsLostPUBACKIsReportedRecalled(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url)
	g := groupOf12(t, srv)
	px := newProxy(t, srv.MQTTAddr())
	a := connect(t, testConfig(t, px.URL(), 1))

	px.Stall()
	type result struct {
		out client.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := a.Commit(ctxFor(t, 20*time.Second), client.Change{ConversationID: g.ID, Body: "oops"})
		done <- result{out, err}
	}()
	waitCommitted(t, url, g.ID)
	if _, err := srv.Service.Recall(context.Background(), chat.RecallRequest{ConversationID: g.ID, UserID: 1, TargetSeq: 1,
		ClientMsgID: uuid.NewString()}); err != nil {
		t.Fatalf("recall: %v", err)
	}
	px.Kill() // the PUBACK never reaches the client, which re-publishes
	r := <-done
	if r.err != nil || r.out.Seq != 1 || !r.out.Recalled {
		t.Fatalf("Commit of a message recalled before its PUBACK came: %+v, %v; want seq 1, recalled", r.out, r.err)
	}

	// A message not recalled is not reported so.
	if out, err := a.Commit(ctxFor(t, 10*time.Second), client.Change{ConversationID: g.ID, Body: "kept"}); err != nil || out.Seq != 3 || out.Recalled {
		t.Fatalf("Commit of a message: %+v, %v; want seq 3, not recalled", out, err)
	}
}
