package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testnode"
)

// An upload whose body arrives honestly but slowly, over more than the
// 2 s grace a request answered without its body gets (bodyDeadline), and
// after a 100 Continue its client waited for, is taken whole through
// every wrapper of the HTTP path (bodyDeadline's, the HTTP cap's, the
// metrics'), on a connection kept for the next request: the grace starts
// only once the answer does.
func TestAnUploadSentSlowerThanTheAnsweredBodyGraceIsTakenWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := startAttachNode(t, false, map[string]string{"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "4"})
	conv := mustDirect(t, ctx, n.Server, 1, 2)
	const pieces, piece = 4, 16 << 10
	data := bytes.Repeat([]byte("slow but steady\n"), pieces*piece/16)
	tk, r := n.ticket(t, 1, conv.ID, "slow.txt", "text/plain", len(data))
	if r.status != http.StatusCreated {
		t.Fatalf("upload.create: %d %s", r.status, r.body)
	}
	u, err := url.Parse(tk.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := dialHTTPFrom(t, "127.0.0.11", n.HTTPAddr())
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	var hdr bytes.Buffer
	fmt.Fprintf(&hdr, "%s %s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nExpect: 100-continue\r\n",
		tk.Method, u.RequestURI(), testnode.Token(t, 1), len(data))
	for k, v := range tk.Headers {
		fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
	}
	hdr.WriteString("\r\n")
	if _, err := c.Write(hdr.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	cont, err := http.ReadResponse(br, nil)
	if err != nil || cont.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue before the body, got %v, %v", cont, err)
	}
	start := time.Now()
	for i := range pieces {
		if i > 0 {
			time.Sleep(time.Second) // the pace of a slow link, not a wait for the server
		}
		if _, err := c.Write(data[i*piece : (i+1)*piece]); err != nil {
			t.Fatalf("piece %d, %v in: %v", i, time.Since(start).Round(time.Millisecond), err)
		}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to an upload sent over %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("upload sent over %v: %d (Connection: close %v) %s, want 200 keeping the connection",
			time.Since(start).Round(time.Millisecond), resp.StatusCode, resp.Close, body)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("the body took %v to send, not longer than the grace: the test shows nothing", took)
	}
	getHealthz(t, c)
}
