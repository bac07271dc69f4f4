package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/httpapi"
)

// TestAJSONAnswerWhoseClientStopsReadingEndsAfterTheIdleTime: a page of
// history is megabytes (200 messages of 16 KiB, each control character
// six bytes of JSON); a client that asked for it and read nothing held
// the handler and the whole answer in memory as long as it kept the
// connection, as many times as it opened one. It ends as a download does
// once the client took less than 4 KiB in the idle time.
func TestAJSONAnswerWhoseClientStopsReadingEndsAfterTheIdleTime(t *testing.T) {
	e := newEnv(t)
	const idle = 300 * time.Millisecond
	httpapi.SetTransferIdle(e.api, idle)
	g := e.group(1, 2)
	body := strings.Repeat("\x01", 16<<10)
	for range 200 {
		e.sendMsg(1, g, newID(), body)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/conversations/%d/messages?limit=200 HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n\r\n", g, e.token(2)); err != nil {
		t.Fatal(err)
	}
	ended := func() bool {
		return strings.Contains(e.logs.String(), `"pattern":"GET /v1/conversations/{id}/messages"`)
	}
	for deadline := time.Now().Add(10 * time.Second); !ended() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !ended() {
		t.Fatalf("the history page a client stopped reading still runs 10 s on (idle time %v)", idle)
	}
	// Read whole, the same page is served.
	if r := e.do(2, "GET", pathf("/v1/conversations/%d/messages?limit=200", g), nil); r.status != http.StatusOK || len(r.body) < 200*6*(16<<10) {
		t.Fatalf("the page read whole: %d, %d bytes", r.status, len(r.body))
	}
}
