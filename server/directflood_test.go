package server_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// Each refused publish answers with an error event, and a QoS 0 publish
// waits for no PUBACK: a client that does not read its socket (or
// acknowledges nothing) while it floods refused publishes made the server
// queue every error event for it, unbounded, until its connection ended
// 30 s later: ~280 bytes of heap a publish, 74 MiB in 5 s from one
// connection. Now a session holds at most 1,024 such events unwritten and
// drops the ones beyond.
func TestUnreadErrorEventsOfAFloodOfRefusedPublishesAreBounded(t *testing.T) {
	srv, conv := startDirect(t, nil)
	c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 4, ClientID: "flood", Password: testnode.Token(t, 1),
		Clean: true, NoAutoAck: true, ReadBuffer: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Drop)
	c.StopReading()
	base := testkit.LiveHeap()
	const n = 80000 // unbounded, ~22 MiB of error events: well over the bound below
	for i := range n {
		if _, err := c.Publish(testnode.MsgTopic(conv.ID), 0, []byte("not json")); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// The read loop answers in order: once this send is stored, every
	// refused publish before it has queued its error event.
	if _, err := c.Publish(testnode.MsgTopic(conv.ID), 0, testnode.SendPayload(newID(), "last")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 120*time.Second, "the flood to be processed", func() bool { return countMessages(t, srv.Pool, conv.ID) == 1 })
	if grew := testkit.LiveHeap() - base; grew > 8<<20 {
		t.Fatalf("%d refused publishes of a client that reads nothing grew the heap by %d MiB", n, grew>>20)
	}
}
