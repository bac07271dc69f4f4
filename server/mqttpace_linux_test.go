package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// mqttSlowTimeout is the nodes' slow-consumer timeout in these tests (30 s
// in production).
const mqttSlowTimeout = 500 * time.Millisecond

// backlog is how many messages of about 16 KiB wait for the phone.
const backlog = 700

// startBacklog starts a node that disconnects slow consumers after
// mqttSlowTimeout, parks user 2's persistent session phone-2 and commits
// backlog messages of about 16 KiB from user 1 to their group while it is
// away. It answers the node, the group and the seq of the first message.
// The window is 1024: with the default 64, at most a MiB is unacknowledged,
// which the socket buffers hold, and no write blocks for long.
func startBacklog(t *testing.T) (*server.Server, int64, int64) {
	t.Helper()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_INFLIGHT": "1024"}, server.WithSlowTimeout(mqttSlowTimeout))
	conv := mustGroup(t, context.Background(), srv, 1, "backlog", []int64{2})
	before := parkSession(t, srv, 2, "phone-2", 5, conv.ID)
	body := strings.Repeat("a line of text, long enough to fill the socket buffers\n", 290)
	for i := range backlog {
		mustSendAs(t, srv, conv.ID, 1, fmt.Sprint(i, " ", body))
	}
	return srv, conv.ID, before + 1
}

// resumeOn connects phone-2 again over conn and subscribes it.
func resumeOn(t *testing.T, conn net.Conn) *mqtttest.Client {
	t.Helper()
	c, _, err := mqtttest.DialConn(conn, mqtttest.Options{Version: 5, ClientID: "phone-2", Username: "2",
		Password: testnode.Token(t, 2), Expiry: expiryFor(5, false)})
	if err != nil {
		t.Fatalf("resume phone-2: %v", err)
	}
	t.Cleanup(c.Drop)
	if codes, err := c.Subscribe(testnode.EventsTopic(2)); err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		t.Fatalf("subscribe events: %v %v", codes, err)
	}
	return c
}

// TestAClientReadingABacklogSteadilyOverASlowLinkIsNotDisconnected: a
// client that caught up fast, then went on reading far more than a
// message in every slow timeout, was disconnected as a slow consumer.
// Once the server's send buffer (grown on the fast start) is full, Linux
// wakes the blocked writer only when a third of it has drained, so one
// write waited for that third at the client's pace, longer than the slow
// timeout. What the client's TCP acknowledges while a write blocks now
// counts as progress. (The slow timeout is 60 times shorter than in
// production but the kernel's window steps are not, hence a pace of
// 160 KiB per slow timeout.)
func TestAClientReadingABacklogSteadilyOverASlowLinkIsNotDisconnected(t *testing.T) {
	srv, conv, first := startBacklog(t)
	pc := &pacedConn{Conn: dialWeakLink(t, srv.MQTTAddr()), fast: 4 << 20, per: 32 << 10, tick: 100 * time.Millisecond, slowFor: 12 * mqttSlowTimeout}
	t.Logf("phone-2 reads 4 MiB at once, then %d KiB per %v (%d KiB per slow timeout of %v) for %v, then at once",
		pc.per>>10, pc.tick, pc.per*int(mqttSlowTimeout/pc.tick)>>10, mqttSlowTimeout, pc.slowFor)
	c := resumeOn(t, pc)
	assertInOrder(t, collectMessages(t, c, conv, backlog, 60*time.Second), first)
}

// TestAClientThatStopsReadingABacklogIsStillDisconnected: counting what a
// client's TCP acknowledged must not keep one that takes nothing while a
// write to it blocks (what is left of the backlog is more than the socket
// buffers hold).
func TestAClientThatStopsReadingABacklogIsStillDisconnected(t *testing.T) {
	srv, conv, _ := startBacklog(t)
	c := resumeOn(t, dialWeakLink(t, srv.MQTTAddr()))
	collectMessages(t, c, conv, 50, 60*time.Second)
	c.StopReading()
	testkit.WaitFor(t, 20*mqttSlowTimeout, "phone-2 disconnected as a slow consumer", func() bool { return srv.Hub.Session("phone-2") == nil })
}
