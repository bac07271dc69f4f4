package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A request answered before its body arrived in full (refused without a
// token, or for a body over the limit, or a file served to a GET that
// announced a body) waited for the rest of the body before its answer
// went out: net/http reads up to 256 KiB of what a handler left before it
// writes the answer. The wait was the body timeout (60 s) for the first,
// so that a client with no account held any number of connections from
// one address for a minute each with a request line and headers alone
// (the HTTP cap does not count a connection whose request is running),
// and had no end at all for the second, whose deadline the API cleared
// once it had read up to the limit. Now the rest gets a short grace once
// the answer is under way: each is answered at once and its connection
// closed, while a request whose body came with it is answered as before,
// on a connection kept for the next.
func TestARequestAnsweredBeforeItsBodyArrivedIsNotHeldWaitingForIt(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	addr := srv.HTTPAddr()
	const ip = "127.0.0.9"
	limit := srv.Service.Limits.MaxRequestBytes()
	stalls := []struct {
		what string
		send string
		want int
	}{
		{"an anonymous POST whose body never comes", "POST /v1/conversations HTTP/1.1\r\nHost: chatd\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", http.StatusUnauthorized},
		{"a POST of more than the limit whose rest never comes", fmt.Sprintf("POST /v1/conversations HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", testnode.Token(t, 1), limit+100<<10, strings.Repeat(" ", int(limit)+1)), http.StatusRequestEntityTooLarge},
		{"a GET of the web client announcing a body that never comes", "GET /app.js HTTP/1.1\r\nHost: chatd\r\nContent-Length: 100\r\n\r\n", http.StatusOK},
	}
	// Each read on its own: one answer's wait is not the next one's.
	var wg sync.WaitGroup
	for _, s := range stalls {
		for i := range 3 {
			c := dialHTTPFrom(t, ip, addr)
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, s.send); err != nil {
				t.Fatalf("%s (%d): send: %v", s.what, i, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := answeredAndClosed(c, s.want); err != nil {
					t.Errorf("%s (%d): %v", s.what, i, err)
				}
			}()
		}
	}
	wg.Wait()
	testkit.WaitFor(t, 5*time.Second, "no connection of "+ip+" left", func() bool {
		_, tracked := srv.HTTPConns(ip)
		return tracked == 0
	})

	// A request whose body came with it and was refused without being
	// read keeps its connection, as before.
	c := dialHTTPFrom(t, ip, addr)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /v1/conversations HTTP/1.1\r\nHost: chatd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	readAnswer(t, c, http.StatusUnauthorized)
	getHealthz(t, c)
}

// answeredAndClosed wants, within c's deadline, an answer on c with
// status want and Connection: close, and then the connection closed.
func answeredAndClosed(c net.Conn, want int) error {
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("no answer within 10 s: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read the answer's body: %w", err)
	}
	if resp.StatusCode != want || !resp.Close {
		return fmt.Errorf("%d (Connection: close %v), want %d closing the connection", resp.StatusCode, resp.Close, want)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the connection is still open after its answer (%v)", err)
	}
	return nil
}

// A request refused before its body was read, whose body net/http would
// not read anyway, is answered at once and its connection closed, not
// after answeredBodyGrace: one that asked for 100 Continue (its client
// waits for it before sending the body, which the refusal never asks
// for) and one whose unread rest is over the 256 KiB net/http reads of a
// body its handler left. net/http tells both from the request's own body,
// so the handler chain must leave it in place.
func TestARequestRefusedWhoseBodyNetHTTPWouldNotReadIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	addr := srv.HTTPAddr()
	for _, s := range []struct {
		what string
		send string
	}{
		{"an anonymous POST waiting for 100 Continue", "POST /v1/conversations HTTP/1.1\r\nHost: chatd\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"},
		{"an anonymous POST of 1 MiB whose rest is on its way", "POST /v1/conversations HTTP/1.1\r\nHost: chatd\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{" + strings.Repeat(" ", 1023)},
	} {
		c := dialHTTPFrom(t, "127.0.0.10", addr)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, err := io.WriteString(c, s.send); err != nil {
			t.Fatalf("%s: send: %v", s.what, err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer within 10 s: %v", s.what, err)
		}
		// The answer's own time, a few milliseconds; the grace is 2 s.
		took := time.Since(start)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Errorf("%s: %d (Connection: close %v), want 401 closing the connection", s.what, resp.StatusCode, resp.Close)
		}
		if took >= 2*time.Second {
			t.Errorf("%s: answered after %v, once net/http had waited for a body it does not read (want at once, the connection closed)", s.what, took.Round(time.Millisecond))
		}
		// Closed, once net/http has given up on the body (within the grace).
		if !closedWithin(c, 5*time.Second) {
			t.Errorf("%s: the connection is still open 5 s after its answer", s.what)
		}
	}
}
