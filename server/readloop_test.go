package server_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestPubacksFollowPublishOrderWhileCommitsFinishOutOfOrder: one client
// publishes first to a conversation whose row is locked elsewhere, then
// many times to another. The later sends commit first (group commit keeps
// the locked conversation's send apart), yet no PUBACK leaves before the
// first publish's; once it commits, every PUBACK arrives in publish order
// (MQTT v5 §4.6), each with the seq its own publish got.
func TestPubacksFollowPublishOrderWhileCommitsFinishOutOfOrder(t *testing.T) {
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	ctx := context.Background()
	a := mustGroup(t, ctx, srv, 1, "a", []int64{2})
	b := mustGroup(t, ctx, srv, 1, "b", []int64{2})
	c := rawClient(t, srv.MQTTAddr(), 1, "orderly", 5, true)

	// Hold conversation b's row: its sends wait for the lock.
	release := pgtest.LockConversation(t, ctx, srv.Pool, b.ID)
	defer release() // before the node's cleanup, which waits for the sends
	var pending []mqtttest.Pending
	convOf := map[uint16]int64{}
	publish := func(conv int64, body string) {
		t.Helper()
		p, err := c.PublishAsync(testnode.MsgTopic(conv), testnode.SendPayload(newID(), body))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
		convOf[p.ID] = conv
	}
	publish(b.ID, "first, to the locked conversation")
	testkit.WaitFor(t, 10*time.Second, "the first send waiting for the lock", func() bool {
		var n int
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())`).Scan(&n)
		return n > 0
	})
	const more = 30
	for i := range more {
		conv := a.ID
		if i%10 == 9 {
			conv = b.ID
		}
		publish(conv, "m"+strconv.Itoa(i))
	}
	testkit.WaitFor(t, 10*time.Second, "conversation a's sends committed", func() bool {
		var last int64
		_ = srv.Pool.QueryRow(ctx, `SELECT last_seq FROM conversation WHERE id = $1`, a.ID).Scan(&last)
		return last == more-more/10
	})
	time.Sleep(100 * time.Millisecond) // give a misordered PUBACK the chance to show
	if got := c.AckOrder(); len(got) > 0 {
		t.Fatalf("%d PUBACKs while the first publish has not committed: %v", len(got), got)
	}
	release()
	seqs := map[int64]int64{}
	for i, p := range pending {
		ack, err := p.Wait()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if ack.ReasonCode != 0 {
			t.Fatalf("publish %d: reason %#x", i, ack.ReasonCode)
		}
		seqs[convOf[p.ID]]++
		if got := userProp(ack.Properties.User, "seq"); got != strconv.FormatInt(seqs[convOf[p.ID]], 10) {
			t.Fatalf("publish %d to conversation %d acknowledged with seq %s, want %d", i, convOf[p.ID], got, seqs[convOf[p.ID]])
		}
	}
	order := c.AckOrder()
	if len(order) != len(pending) {
		t.Fatalf("%d PUBACKs, want %d", len(order), len(pending))
	}
	for i, id := range order {
		if id != pending[i].ID {
			t.Fatalf("PUBACK %d is for packet %d, want %d (publish order): %v", i, id, pending[i].ID, order)
		}
	}
}

// TestOneConnectionsPublishesInFlightShareGroupCommits: a client that
// publishes without waiting for each PUBACK gets its sends committed
// together, not one transaction per publish; the read loop never waited
// for a commit.
func TestOneConnectionsPublishesInFlightShareGroupCommits(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "burst", []int64{2})
	c := rawClient(t, srv.MQTTAddr(), 1, "burst", 5, true)
	// Slow every commit of the conversation a little (a lock held 50 ms at
	// a time) so the publishes arrive while a batch is in flight.
	hold := func() {
		tx, err := srv.Pool.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = tx.Exec(ctx, `SELECT 1 FROM conversation WHERE id = $1 FOR UPDATE`, conv.ID)
		time.Sleep(50 * time.Millisecond)
		_ = tx.Rollback(ctx)
	}
	hold()
	before := srv.BatchStats()
	done := make(chan struct{})
	go func() {
		defer close(done)
		hold()
	}()
	const n = 60
	var pending []mqtttest.Pending
	for i := range n {
		p, err := c.PublishAsync(testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), "b"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	<-done
	for i, p := range pending {
		if ack, err := p.Wait(); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("publish %d: %v %#x", i, err, ack.ReasonCode)
		}
	}
	after := srv.BatchStats()
	if batches, msgs := after.Batches-before.Batches, after.Messages-before.Messages; msgs != n || batches > n/4 {
		t.Fatalf("%d transactions for %d sends of one connection: its publishes did not share commits", batches, msgs)
	}
}

// TestClientPagingHistoryKeepsAcknowledgingDeliveries: while a member's
// history request waits for PostgreSQL (a table its query reads is
// locked), that same connection keeps acknowledging its deliveries, so
// messages sent to it keep flowing past the delivery window instead of
// stalling behind the request.
func TestClientPagingHistoryKeepsAcknowledgingDeliveries(t *testing.T) {
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "busy reader", []int64{2})
	sender := rawClient(t, srv.MQTTAddr(), 1, "sender", 5, true)
	reader := rawClient(t, srv.MQTTAddr(), 2, "reader", 5, true)

	// History reads the members' watermarks (member_watermark); with
	// member_delivery locked, a history request waits.
	pgtest.LockTable(t, url, "member_delivery IN ACCESS EXCLUSIVE MODE")
	rpc := make(chan error, 4)
	for range 4 {
		go func() {
			ack, err := reader.Publish("chat/v1/rpc/history", 1, []byte(`{"conversationId":`+strconv.FormatInt(conv.ID, 10)+`}`),
				mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/2/rpc/replies", CorrelationData: []byte("h")})
			if err == nil && ack.ReasonCode != 0 {
				err = packets.Code{Code: ack.ReasonCode}
			}
			rpc <- err
		}()
	}
	// Three windows' worth (the default window is 64).
	const n = 200
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			if _, err := sender.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "d"+strconv.Itoa(i))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	start := time.Now()
	got := collectMessages(t, reader, conv.ID, n, 4*time.Second)
	assertInOrder(t, got, 1)
	t.Logf("%d deliveries in %v with history requests waiting", n, time.Since(start).Round(time.Millisecond))
	for range 4 {
		if err := <-rpc; err != nil {
			t.Fatalf("history request: %v", err)
		}
	}
	// Deliveries can reach the reader before the sender's last PUBACKs:
	// every send is still acknowledged, before the connection goes.
	<-sent
}
