package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestAFileNameLosesWhatWouldRearrangeHowItReads: a right-to-left
// override made "photo\u202egpj.exe" read "photoexe.jpg" beside the file
// and in the name a browser saves it under; a file's name is a one-line
// field, and loses the bidirectional controls and line separators that
// names and titles refuse, as it loses control characters.
func TestAFileNameLosesWhatWouldRearrangeHowItReads(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(1, 2)
	photo := mediatest.JPEG(40, 30)
	var tk chat.UploadTicket
	e.must(http.StatusCreated, 1, "POST", "/v1/uploads",
		map[string]any{"conversationId": g, "name": "photo\u202egpj\u2066.exe\u2028\u200f", "contentType": "image/jpeg", "size": len(photo)}, &tk)
	if r := e.do(1, "PUT", "/v1/uploads/"+tk.UploadID, photo, withHeader("Content-Type", "image/jpeg")); r.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.status, truncate(r.body))
	}
	var u chat.Upload
	e.must(http.StatusOK, 1, "GET", "/v1/uploads/"+tk.UploadID, nil, &u)
	if u.Attachment == nil || u.Attachment.Name != "photogpj.exe" {
		t.Errorf("the upload's name: %+v, want photogpj.exe", u.Attachment)
	}
	e.must(http.StatusCreated, 1, "POST", pathf("/v1/conversations/%d/messages", g),
		map[string]any{"clientMsgId": newID(), "attachments": []map[string]string{{"uploadId": tk.UploadID}}}, nil)
	r := e.do(2, "GET", "/v1/attachments/"+tk.UploadID, nil)
	if cd := r.header.Get("Content-Disposition"); r.status != http.StatusOK || strings.Contains(strings.ToLower(cd), "%e2%80%ae") || !strings.Contains(cd, "photogpj.exe") {
		t.Errorf("download: %d, Content-Disposition %q", r.status, cd)
	}
}
