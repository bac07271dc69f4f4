package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestEvery416SaysTheFilesSize: a download's 416 carries Content-Range:
// bytes */<size> and names the size, as docs/http.md says, whether the
// Range starts past the end or does not parse (net/http answers those
// 416 without Content-Range, and the message read "the file of  bytes").
func TestEvery416SaysTheFilesSize(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(owner, member)
	upload := e.uploadPhoto(owner, g, mediatest.JPEG(300, 200))
	up := "/v1/uploads/" + upload
	e.must(http.StatusOK, owner, "POST", up+"/complete", nil, nil)
	e.must(http.StatusCreated, owner, "POST", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "attachments": []map[string]string{{"uploadId": upload}}}, nil)

	for _, path := range []string{"/v1/attachments/" + upload, "/v1/attachments/" + upload + "/thumbnail"} {
		past := e.do(member, "GET", path, nil, withHeader("Range", "bytes=99999999-"))
		want := past.header.Get("Content-Range")
		if past.status != http.StatusRequestedRangeNotSatisfiable || !strings.HasPrefix(want, "bytes */") {
			t.Fatalf("%s past the end: %d, Content-Range %q", path, past.status, want)
		}
		size := strings.TrimPrefix(want, "bytes */")
		for _, rg := range []string{"bytes=5-1", "bytes=a-b", "bytes=--1", "bytes=99999999999999999999-", "bytes=-9223372036854775808", "bytes=1"} {
			r := e.do(member, "GET", path, nil, withHeader("Range", rg))
			if r.status != http.StatusRequestedRangeNotSatisfiable {
				t.Errorf("%s Range %q: %d, want 416", path, rg, r.status)
				continue
			}
			var eb struct {
				Error struct{ Code, Message string }
			}
			r.decode(t, &eb)
			if got := r.header.Get("Content-Range"); got != want || eb.Error.Code != "range_not_satisfiable" || !strings.Contains(eb.Error.Message, " "+size+" bytes") {
				t.Errorf("%s Range %q: Content-Range %q (want %q), %s", path, rg, got, want, truncate(r.body))
			}
		}
	}
}
