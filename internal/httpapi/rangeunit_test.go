package httpapi_test

import (
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestARangeUnitInAnyLetterCaseIsBytes: range unit names are
// case-insensitive (RFC 9110, 14.1), so "Bytes=0-1" asks for the first two
// bytes as "bytes=0-1" does: 206 with them. net/http knows the unit in
// lower case only and answered 416, as for a malformed range.
func TestARangeUnitInAnyLetterCaseIsBytes(t *testing.T) {
	e, id, size := rangeEnv(t)
	for _, rg := range []string{"bytes=0-1", "Bytes=0-1", "BYTES=0-1"} {
		r := e.do(2, "GET", "/v1/attachments/"+id, nil, withHeader("Range", rg))
		if want := pathf("bytes 0-1/%d", size); r.status != http.StatusPartialContent || len(r.body) != 2 || r.header.Get("Content-Range") != want {
			t.Errorf("Range %q: %d, %d bytes, Content-Range %q; want 206, 2 bytes, %q", rg, r.status, len(r.body), r.header.Get("Content-Range"), want)
		}
	}
}

// TestARangeOfAnUnknownUnitIsIgnored: a server must ignore a Range whose
// unit it does not understand (RFC 9110, 14.2) and serve the whole file,
// where chatd answered 416 as for a malformed byte range.
func TestARangeOfAnUnknownUnitIsIgnored(t *testing.T) {
	e, id, size := rangeEnv(t)
	for _, rg := range []string{"items=0-1", "lines=1-2", "0-1"} {
		r := e.do(2, "GET", "/v1/attachments/"+id, nil, withHeader("Range", rg))
		if r.status != http.StatusOK || int64(len(r.body)) != size || r.header.Get("Content-Range") != "" {
			t.Errorf("Range %q: %d, %d bytes, Content-Range %q; want 200 with all %d bytes", rg, r.status, len(r.body), r.header.Get("Content-Range"), size)
		}
	}
}

// rangeEnv sends a photo to a group of users 1 and 2 and returns its
// upload id and stored size.
func rangeEnv(t *testing.T) (*env, string, int64) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(1, 2)
	upload := e.uploadPhoto(1, g, mediatest.JPEG(40, 30))
	e.must(http.StatusCreated, 1, "POST", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "attachments": []map[string]string{{"uploadId": upload}}}, nil)
	var stored chat.Upload
	e.must(http.StatusOK, 1, "GET", "/v1/uploads/"+upload, nil, &stored)
	return e, upload, stored.Attachment.Size
}

// TestA416TellsCachesNotToStoreIt: every answer carries Cache-Control
// (docs/http.md, conventions): no-store, or private, no-cache with an
// ETag. net/http drops Cache-Control and ETag from the errors
// http.ServeContent writes, so a download's 416 went out with none.
func TestA416TellsCachesNotToStoreIt(t *testing.T) {
	e, id, _ := rangeEnv(t)
	for _, rg := range []string{"bytes=99999999-", "bytes=a-b"} {
		r := e.do(2, "GET", "/v1/attachments/"+id, nil, withHeader("Range", rg))
		if r.status != http.StatusRequestedRangeNotSatisfiable || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("Range %q: %d, Cache-Control %q; want 416 with no-store", rg, r.status, r.header.Get("Cache-Control"))
		}
	}
}
