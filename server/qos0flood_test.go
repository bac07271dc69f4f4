package server_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A QoS 0 read receipt (or typing indicator) waits for no PUBACK, so the
// Receive Maximum that bounds a connection's QoS 1 publishes in flight did
// not bound these: each got a goroutine of its own that waited for
// PostgreSQL, and while writes were slow one connection could start them
// without limit (5,000 goroutines for 5,000 receipts). Now a connection has
// at most as many QoS 0 publishes in flight as QoS 1 ones; past that its
// socket is not read until one finishes, and none is lost.
func TestQoS0PublishesInFlightPerConnectionAreBoundedWhileTheDatabaseIsSlow(t *testing.T) {
	srv, conv := startDirect(t, nil)
	ctx := context.Background()
	sender := rawClient(t, srv.MQTTAddr(), 2, "qos0flood-sender", 5, true)
	if ack, err := sender.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "read me")); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send: 0x%02x %v", ack.ReasonCode, err)
	}
	c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 4, ClientID: "qos0flood", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Drop)

	// Read receipts cannot be written while this transaction holds the
	// table.
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE conversation_member IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	const n = 5000
	for i := range n {
		if _, err := c.Publish(testnode.ReadTopic(conv.ID), 0, []byte(`{"seq":1}`)); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	// Watch the server read what it will, for a second.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if g := runtime.NumGoroutine() - base; g > 1000 {
			t.Fatalf("%d QoS 0 receipts waiting for the database hold %d more goroutines", n, g)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the receipt to be written", func() bool {
		var read int64
		_ = srv.Pool.QueryRow(ctx, "SELECT last_read_seq FROM conversation_member WHERE conversation_id=$1 AND user_id=1", conv.ID).Scan(&read)
		return read == 1
	})
	// The connection is still served.
	if _, err := c.Subscribe(testnode.EventsTopic(1)); err != nil {
		t.Fatalf("subscribe after the flood: %v", err)
	}
}
