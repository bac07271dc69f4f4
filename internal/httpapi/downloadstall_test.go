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

// TestADownloadWhoseClientStopsReadingEndsAfterTheIdleTime: a client that
// asks for a file and reads nothing (its receive window full) held the
// request's handler and the open file for as long as it kept the
// connection, keepalives answered by its kernel: a member could hold as
// many as they opened. Like an upload that stalls, the download ends once
// its client took less than 4 KiB in the idle time; a connection kept
// alive after a whole download still serves a request that comes later
// than that.
func TestADownloadWhoseClientStopsReadingEndsAfterTheIdleTime(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	const idle = 300 * time.Millisecond
	httpapi.SetTransferIdle(e.api, idle)
	g := e.group(1, 2)
	file := bytes.Repeat([]byte("a line of text, long enough to fill the socket buffers\n"), 400_000) // 22 MB
	var tk chat.UploadTicket
	e.must(http.StatusCreated, 1, "POST", "/v1/uploads", map[string]any{"conversationId": g, "name": "big.txt", "contentType": "text/plain", "size": len(file)}, &tk)
	if r := e.do(1, "PUT", "/v1/uploads/"+tk.UploadID, file, withHeader("Content-Type", "text/plain")); r.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.status, truncate(r.body))
	}
	e.must(http.StatusCreated, 1, "POST", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "attachments": []map[string]string{{"uploadId": tk.UploadID}}}, nil)

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/attachments/%s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n\r\n", tk.UploadID, e.token(2)); err != nil {
		t.Fatal(err)
	}
	ended := func() bool { return strings.Contains(e.logs.String(), `"pattern":"GET /v1/attachments/{id}"`) }
	for deadline := time.Now().Add(10 * time.Second); !ended() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !ended() {
		t.Fatalf("the download a client stopped reading still runs 10 s on (idle time %v)", idle)
	}

	// A whole download, then a request on the same connection after the
	// idle time: the download's write deadline must not end it. (A raw
	// connection: http.Transport would retry a GET its reused connection
	// failed, on a new one.)
	kept, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	rd := bufio.NewReader(kept)
	get := func(path string) (int, int) {
		if _, err := fmt.Fprintf(kept, "GET %s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n\r\n", path, e.token(2)); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		res, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return res.StatusCode, len(b)
	}
	if status, n := get("/v1/attachments/" + tk.UploadID); status != http.StatusOK || n != len(file) {
		t.Fatalf("whole download: %d, %d bytes", status, n)
	}
	// The kept-alive connection sits past the download's last deadline.
	<-time.After(3 * idle)
	if status, _ := get("/v1/inbox"); status != http.StatusOK {
		t.Fatalf("a request on the connection after a download: %d", status)
	}
}
