package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/broker"
	"github.com/chatd/chatd/internal/pgtest"
)

// A connection that has sent no CONNECT yet has no session to drain: the
// shutdown closes it at once (it connects again elsewhere). It used to
// wait for the connection's CONNECT deadline, 10 s, whatever the budget:
// a budget of 2 s took 10 s, and a port scanner or a phone gone silent
// mid-connect held every stop that long.
func TestAConnectionThatSentNoCONNECTDoesNotHoldTheShutdown(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	tcp, err := net.Dial("tcp", srv.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	ws, err := net.Dial("tcp", srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	fmt.Fprintf(ws, "GET /mqtt HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n", srv.HTTPAddr())
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(ws).ReadString('\n'); err != nil || !strings.Contains(line, " 101 ") {
		t.Fatalf("WebSocket upgrade: %q %v", line, err)
	}
	for deadline := time.Now().Add(10 * time.Second); srv.Broker.AwaitingConnect() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections wait for their CONNECT, want 2", srv.Broker.AwaitingConnect())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > broker.ConnectTimeout/2 {
		t.Fatalf("Close took %v with two connections that sent no CONNECT (the CONNECT deadline is %v)", took.Round(time.Millisecond), broker.ConnectTimeout)
	}
}
