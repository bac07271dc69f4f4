package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// rawPut sends user's PUT of upload id (size bytes of text) on a
// connection of its own, its body written by feed until stop closes,
// and reads the answer, waiting at most 10 s for it.
func (e *env) rawPut(user int64, id string, size int, feed func(w io.Writer, stop <-chan struct{})) (resp, time.Duration, error) {
	e.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := fmt.Fprintf(c, "PUT /v1/uploads/%s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n",
		id, e.token(user), size); err != nil {
		e.t.Fatal(err)
	}
	stop, fed := make(chan struct{}), make(chan struct{})
	go func() { defer close(fed); feed(c, stop) }()
	defer func() { close(stop); <-fed }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return resp{}, time.Since(start), err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}, time.Since(start), err
}

// textTicket is a ticket for a text file of size bytes by user in conv.
func (e *env) textTicket(user, conv int64, size int) string {
	e.t.Helper()
	var tk chat.UploadTicket
	e.must(http.StatusCreated, user, "POST", "/v1/uploads", map[string]any{"conversationId": conv, "name": "a.txt", "contentType": "text/plain", "size": size}, &tk)
	return tk.UploadID
}

// TestAnUploadPutTricklingBelowTheMinimumEndsAsAStalledOneDoes: a PUT's
// read deadline was the idle time from its last byte, so one that sent a
// byte within every idle time (a byte every 59 s) held its upload, a
// temporary file and a handler for as long as its client liked. A PUT
// must deliver 16 KiB, or the rest of its body, within each idle time;
// one that trickles below that ends as a PUT that stalls does, with the
// same answer, its upload still pending: a whole PUT then completes it.
func TestAnUploadPutTricklingBelowTheMinimumEndsAsAStalledOneDoes(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	const idle = 500 * time.Millisecond
	httpapi.SetTransferIdle(e.api, idle)
	g := e.group(owner, member)
	const size = 256 << 10

	stalled, took, err := e.rawPut(member, e.textTicket(member, g, size), size, func(_ io.Writer, stop <-chan struct{}) { <-stop })
	if err != nil {
		t.Fatalf("a PUT that sends no byte of its body: no answer after %v (idle time %v): %v", took, idle, err)
	}
	t.Logf("stalled PUT: %d %s after %v", stalled.status, stalled.body, took.Round(time.Millisecond))

	const every = idle / 5
	id := e.textTicket(member, g, size)
	sent := 0
	trickled, took, err := e.rawPut(member, id, size, func(w io.Writer, stop <-chan struct{}) {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				sent++
			}
		}
	})
	if err != nil {
		t.Fatalf("a PUT trickling a byte every %v (idle time %v) still runs %v after its headers: %v", every, idle, took.Round(time.Millisecond), err)
	}
	t.Logf("trickled PUT: %d %s after %v, %d bytes sent", trickled.status, trickled.body, took.Round(time.Millisecond), sent)
	if trickled.status != stalled.status || trickled.errorCode() != stalled.errorCode() || trickled.header.Get("Connection") != stalled.header.Get("Connection") {
		t.Errorf("a PUT cut off for trickling: %d %s (Connection %q); want what a stalled PUT gets: %d %s (Connection %q)",
			trickled.status, trickled.body, trickled.header.Get("Connection"), stalled.status, stalled.body, stalled.header.Get("Connection"))
	}
	if r := e.do(member, "PUT", "/v1/uploads/"+id, bytes.Repeat([]byte("x"), size), withHeader("Content-Type", "text/plain")); r.status != http.StatusOK {
		t.Fatalf("the trickled upload PUT again whole: %d %s, want 200", r.status, truncate(r.body))
	}
}

// TestASlowUploadAboveTheMinimumFinishes: an upload over a weak link
// (well above the minimum, with a pause shorter than the idle time)
// takes several idle times and completes.
func TestASlowUploadAboveTheMinimumFinishes(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	const idle = time.Second
	httpapi.SetTransferIdle(e.api, idle)
	g := e.group(owner, member)
	// 8 KiB every 125 ms, 64 KiB/s where the minimum is 16 KiB/s, and a
	// pause of 0.4 idle times after 40 KiB: 2.4 s.
	const chunk, every, pause, size = 8 << 10, 125 * time.Millisecond, 400 * time.Millisecond, 128 << 10
	r, took, err := e.rawPut(member, e.textTicket(member, g, size), size, func(w io.Writer, stop <-chan struct{}) {
		for i := 0; i < size/chunk; i++ {
			wait := every
			if i == 5 {
				wait = pause
			}
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			if _, err := w.Write(bytes.Repeat([]byte("x"), chunk)); err != nil {
				return
			}
		}
	})
	if err != nil || r.status != http.StatusOK {
		t.Fatalf("a slow upload (%d KiB every %v, a pause of %v; idle time %v): %d %s after %v, %v; want 200",
			chunk>>10, every, pause, idle, r.status, truncate(r.body), took.Round(time.Millisecond), err)
	}
	if took < 2*idle {
		t.Fatalf("the slow upload took %v, not the several idle times (%v) it is meant to", took, idle)
	}
}
