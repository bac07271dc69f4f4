package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/attach"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/store"
)

// withAttachments gives e the attachment service chatd runs with, on the
// local disk store.
func (e *env) withAttachments() { e.withAttachmentsConfig(attach.Config{}) }

// withAttachmentsConfig is withAttachments with cfg's settings (its Store
// is set here, and its Blobs, a local store in a temporary directory,
// unless given).
func (e *env) withAttachmentsConfig(cfg attach.Config) {
	e.t.Helper()
	if cfg.Blobs == nil {
		blobs, err := blob.NewLocal(e.t.TempDir())
		if err != nil {
			e.t.Fatal(err)
		}
		cfg.Blobs = blobs
	}
	cfg.Store = store.NewAttachments(e.pool)
	a, err := attach.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	a.Start()
	e.t.Cleanup(func() { _ = a.Close(context.Background()) })
	e.svc.Attachments = a
}

// uploadPhoto uploads photo as user into conv and returns its upload id,
// ready to be sent with a message.
func (e *env) uploadPhoto(user, conv int64, photo []byte) string {
	e.t.Helper()
	var tk chat.UploadTicket
	e.must(http.StatusCreated, user, "POST", "/v1/uploads", map[string]any{"conversationId": conv, "name": "a.jpg", "contentType": "image/jpeg", "size": len(photo)}, &tk)
	if r := e.do(user, "PUT", "/v1/uploads/"+tk.UploadID, photo, withHeader("Content-Type", "image/jpeg")); r.status != http.StatusOK {
		e.t.Fatalf("PUT upload: %d %s", r.status, truncate(r.body))
	}
	return tk.UploadID
}

// TestOpenAPIListsWhatUploadsAndDownloadsAnswer: the attachment routes
// (a ticket, the bytes, the upload, the file and its thumbnail, with
// ranges and conditions, and the refusals docs/http.md gives them) answer
// statuses their operations list, and the JSON ones bodies that fit.
func TestOpenAPIListsWhatUploadsAndDownloadsAnswer(t *testing.T) {
	doc := loadSchemaDoc(t)
	e := newEnv(t)
	e.withAttachments()
	g := e.group(owner, member)
	expect := func(user int64, method, pattern, path string, body any, status int, opts ...reqOpt) resp {
		t.Helper()
		r := e.do(user, method, path, body, opts...)
		if r.status != status {
			t.Errorf("%s %s: status %d, want %d; body %s", method, path, r.status, status, truncate(r.body))
		}
		if strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || r.status >= 400 {
			doc.check(t, method, pattern, r.status, r.body)
		} else if doc.response(method, pattern, r.status) == nil {
			t.Errorf("%s %s answered %d, which the spec does not list", method, pattern, r.status)
		}
		return r
	}
	photo := mediatest.JPEG(1200, 800)
	var tk chat.UploadTicket
	expect(owner, "POST", "/v1/uploads", "/v1/uploads",
		map[string]any{"conversationId": g, "name": "a.jpg", "contentType": "image/jpeg", "size": len(photo)}, http.StatusCreated).decode(t, &tk)
	up := "/v1/uploads/" + tk.UploadID
	expect(owner, "GET", "/v1/uploads/{id}", up, nil, http.StatusOK)
	expect(owner, "POST", "/v1/uploads/{id}/complete", up+"/complete", nil, http.StatusBadRequest)
	expect(owner, "PUT", "/v1/uploads/{id}", up, photo, http.StatusOK, withHeader("Content-Type", "image/jpeg"))
	// Sent again: the same bytes are answered as the first PUT, others
	// are a conflict.
	expect(owner, "PUT", "/v1/uploads/{id}", up, photo, http.StatusOK, withHeader("Content-Type", "image/jpeg"))
	other := append([]byte(nil), photo...)
	other[len(other)-3] ^= 0xff
	expect(owner, "PUT", "/v1/uploads/{id}", up, other, http.StatusConflict, withHeader("Content-Type", "image/jpeg"))
	expect(owner, "POST", "/v1/uploads/{id}/complete", up+"/complete", nil, http.StatusOK)
	expect(member, "GET", "/v1/uploads/{id}", up, nil, http.StatusNotFound)
	var sent chat.Message
	expect(owner, "POST", "/v1/conversations/{id}/messages", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "attachments": []map[string]string{{"uploadId": tk.UploadID}}}, http.StatusCreated).decode(t, &sent)

	for _, route := range []string{"/v1/attachments/{id}", "/v1/attachments/{id}/thumbnail"} {
		path := strings.Replace(route, "{id}", tk.UploadID, 1)
		full := expect(member, "GET", route, path, nil, http.StatusOK)
		expect(member, "GET", route, path, nil, http.StatusPartialContent, withHeader("Range", "bytes=0-9"))
		expect(member, "GET", route, path, nil, http.StatusNotModified, withHeader("If-None-Match", full.header.Get("ETag")))
		expect(member, "GET", route, path, nil, http.StatusPreconditionFailed, withHeader("If-Match", `"0000"`))
		expect(member, "GET", route, path, nil, http.StatusRequestedRangeNotSatisfiable, withHeader("Range", "bytes=99999999-"))
		expect(outsider, "GET", route, path, nil, http.StatusForbidden)
	}
	expect(owner, "DELETE", "/v1/conversations/{id}/messages/{seq}", pathf("/v1/conversations/%d/messages/%d", g, sent.Seq), nil, http.StatusOK)
	expect(member, "GET", "/v1/attachments/{id}", "/v1/attachments/"+tk.UploadID, nil, http.StatusGone)
	expect(owner, "PUT", "/v1/uploads/{id}", up, photo, http.StatusConflict, withHeader("Content-Type", "image/jpeg"))
	expect(owner, "GET", "/v1/uploads/{id}", up, nil, http.StatusOK)
}
