package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// stalledSend starts a send over HTTP as user 1 whose body never arrives in
// full, and returns once its handler waits for the body (the server's
// 100 Continue says so).
func stalledSend(t *testing.T, srv *server.Server, conv int64) net.Conn {
	t.Helper()
	tok, err := auth.Mint(srv.Secret, 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /v1/conversations/%d/messages HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n", conv, tok); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("the send's handler did not ask for the body: %q %v", line, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(conn, "{"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// An HTTP request still running when the shutdown budget ran out is cut
// off; Close used to drop http.Server.Shutdown's error, so chatd said
// "chatd stopped" and exited 0 as if every request had been answered.
func TestCloseReportsHTTPRequestsCutOffWhenTheBudgetRunsOut(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	conn := stalledSend(t, srv, conv.ID)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := srv.Close(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "http") {
		t.Fatalf("Close with an HTTP request cut off at the deadline: %v; want an error naming the HTTP requests", err)
	}
	// The request was indeed cut off: the connection is closed.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(conn); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the cut-off request's connection: %v", err)
	}
}

// The budget bounds how long clients may take to finish; a client that
// spent it (here a request body that never arrives) used to leave the
// node's own cleanup after the drain nothing but an expired context:
// pending receipts were not flushed, the node's presence marks were not
// cleared, and PostgreSQL was not waited for. The cleanup now gets a grace
// of its own.
func TestAClientThatSpendsTheShutdownBudgetStillLetsTheNodeFlushAndClearItsPresence(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	_ = rawClient(t, srv.MQTTAddr(), 2, "online-at-shutdown", 5, true)
	pool := openPool(t, url)
	node := srv.Settings.NodeID
	testkit.WaitFor(t, 10*time.Second, "the node's presence row", func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_node WHERE node_id = $1`, node).Scan(&n)
		return n == 1
	})
	stalledSend(t, srv, conv.ID)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := srv.Close(ctx)
	for _, part := range strings.Split(fmt.Sprint(err), "\n") {
		if !strings.HasPrefix(part, "http: ") {
			t.Errorf("Close: %q; want only the HTTP request that was cut off, the node's own cleanup done", part)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_node WHERE node_id = $1`, node).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the node's presence row is still there after Close: its users show online until it expires")
	}
}
