package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// A request body that never arrives in full used to hold its connection
// and handler forever (the server had a deadline for the headers only):
// a client could pile up such requests, without even a token since the
// 401 waited for the body too, and a single one held a graceful shutdown
// to its deadline. The body now has requestBodyTimeout (60 s) to arrive.
func TestARequestBodyThatNeverArrivesIsAnsweredWithinTheBodyTimeout(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil, server.WithBodyTimeout(3*time.Second))
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	authed := stalledSend(t, srv, conv.ID)
	anon, err := net.Dial("tcp", srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := fmt.Fprintf(anon, "POST /v1/conversations/%d/messages HTTP/1.1\r\nHost: chatd\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{", conv.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	answered := make(chan string, 2)
	for _, c := range []net.Conn{authed, anon} {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				line = "no answer: " + err.Error()
			}
			answered <- line
		}()
	}
	for _, who := range []string{"first", "second"} {
		line := <-answered
		took := time.Since(start)
		if took > 15*time.Second || len(line) < 12 || line[:9] != "HTTP/1.1 " || line[9] != '4' {
			t.Errorf("%s stalled request: %q after %v; want a 4xx answer within the body timeout (3 s here)", who, line, took.Round(time.Second))
		}
	}
}
