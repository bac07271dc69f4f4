package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/attach"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAUsersStalledPutsAreCappedAndHoldNoBufferBeforeTheirBytes: each PUT
// of an upload held a 256 KiB buffer from before its first byte for as
// long as its client kept it open, and a user with many tickets could
// hold as many as they opened (2 GB a day within the quota). A user runs
// at most attach.PutsPerUser at once: the next is 429 rate_limited with a
// Retry-After, before a byte is read; a PUT that has received nothing
// holds no buffer; a PUT sent again replaces its own stalled one at the
// cap, and a PUT that ends frees its place.
func TestAUsersStalledPutsAreCappedAndHoldNoBufferBeforeTheirBytes(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(owner, member)
	const size = 1 << 20
	const extra = 4
	tickets := make([]string, attach.PutsPerUser+extra)
	for i := range tickets {
		var tk chat.UploadTicket
		e.must(http.StatusCreated, member, "POST", "/v1/uploads",
			map[string]any{"conversationId": g, "name": "big.txt", "contentType": "text/plain", "size": size}, &tk)
		tickets[i] = tk.UploadID
	}
	// A stalled PUT: its headers, no byte of its body. Expect:
	// 100-continue has the server say when the handler starts reading
	// it: then it holds whatever it holds while it waits.
	stall := func(id string) (net.Conn, string, http.Header) {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "PUT /v1/uploads/%s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
			id, e.token(member), size)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("stalled PUT of %s: no answer, not even 100 Continue: %v", id, err)
		}
		return c, res.Status, res.Header
	}
	base := testkit.LiveHeap()
	var held []net.Conn
	refused := 0
	for i, id := range tickets {
		c, status, h := stall(id)
		switch {
		case strings.HasPrefix(status, "100"):
			held = append(held, c)
		case strings.HasPrefix(status, "429") && h.Get("Retry-After") != "":
			refused++
		default:
			t.Fatalf("stalled PUT %d: %s (Retry-After %q), want 100 Continue or 429 with Retry-After", i+1, status, h.Get("Retry-After"))
		}
	}
	grown := testkit.LiveHeap() - base
	t.Logf("%d stalled PUTs admitted, %d refused; heap +%d KiB", len(held), refused, grown>>10)
	if len(held) != attach.PutsPerUser || refused != extra {
		t.Errorf("%d stalled PUTs of one user admitted and %d refused, want %d admitted and %d refused 429 with Retry-After",
			len(held), refused, attach.PutsPerUser, extra)
	}
	if per := grown / int64(len(held)); per > 64<<10 {
		t.Errorf("each PUT that received no byte holds %d KiB of heap, want under 64", per>>10)
	}
	if t.Failed() {
		return
	}

	// The first upload sent again, whole, at the cap: it replaces its own
	// stalled PUT.
	body := strings.Repeat("x", size)
	if r := e.do(member, "PUT", "/v1/uploads/"+tickets[0], body, withHeader("Content-Type", "text/plain")); r.status != http.StatusOK {
		t.Fatalf("a stalled upload PUT again at the cap: %d %s, want 200", r.status, truncate(r.body))
	}
	// One client going frees a place for a refused upload.
	held[1].Close()
	last := "/v1/uploads/" + tickets[len(tickets)-1]
	var r resp
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = e.do(member, "PUT", last, body, withHeader("Content-Type", "text/plain")); r.status != http.StatusTooManyRequests {
			break
		}
	}
	if r.status != http.StatusOK {
		t.Fatalf("a refused upload PUT again once a stalled PUT ended: %d %s, want 200", r.status, truncate(r.body))
	}
	// Another user is not held back by this one's PUTs.
	var tk chat.UploadTicket
	e.must(http.StatusCreated, owner, "POST", "/v1/uploads", map[string]any{"conversationId": g, "name": "a.txt", "contentType": "text/plain", "size": 3}, &tk)
	if r := e.do(owner, "PUT", "/v1/uploads/"+tk.UploadID, "abc", withHeader("Content-Type", "text/plain")); r.status != http.StatusOK {
		t.Fatalf("another user's PUT: %d %s", r.status, truncate(r.body))
	}
}
