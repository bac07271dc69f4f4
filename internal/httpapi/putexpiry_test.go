package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/attach"
	"github.com/chatd/chatd/internal/blob"
)

// TestAnUploadPutStillSendingWhenItsURLExpiresEndsGone: a PUT that began
// before its upload's expiresAt ran on for as long as its client sent
// above the minimum (a 25 MiB file at 16 KiB a minute: a day past it).
// It ends at expiresAt with the answer a PUT sent after it gets, 410
// gone, keeping nothing: the upload still pending, no temporary file.
func TestAnUploadPutStillSendingWhenItsURLExpiresEndsGone(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	blobs, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	e.withAttachmentsConfig(attach.Config{Blobs: blobs, URLExpiry: 3 * time.Second})
	g := e.group(owner, member)
	// 16 KiB every 100 ms, ten times the minimum per idle time even were
	// that a second: 4 MiB take 25 s.
	const chunk, every, size = 16 << 10, 100 * time.Millisecond, 4 << 20
	var tk chat.UploadTicket
	e.must(http.StatusCreated, member, "POST", "/v1/uploads", map[string]any{"conversationId": g, "name": "a.txt", "contentType": "text/plain", "size": size}, &tk)

	r, took, err := e.rawPut(member, tk.UploadID, size, func(w io.Writer, stop <-chan struct{}) {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for range size / chunk {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := w.Write(bytes.Repeat([]byte("x"), chunk)); err != nil {
				return
			}
		}
	})
	answered := time.Now()
	if err != nil {
		t.Fatalf("a PUT sending %d KiB every %v past its upload's expiresAt (%s): no answer %v after it began: %v",
			chunk>>10, every, tk.ExpiresAt.Format(time.RFC3339), took.Round(time.Millisecond), err)
	}
	if r.status != http.StatusGone || r.errorCode() != "gone" {
		t.Fatalf("a PUT still sending when its upload expired: %d %s, want 410 gone", r.status, truncate(r.body))
	}
	t.Logf("answered %d %s %v after expiresAt", r.status, r.errorCode(), answered.Sub(tk.ExpiresAt).Round(time.Millisecond))
	if late := answered.Sub(tk.ExpiresAt); late > time.Second {
		t.Errorf("the PUT was answered %v after its upload's expiresAt, want within a second", late.Round(time.Millisecond))
	}
	var u chat.Upload
	e.must(http.StatusOK, member, "GET", "/v1/uploads/"+tk.UploadID, nil, &u)
	if u.State != chat.UploadPending {
		t.Errorf("the upload whose PUT ended at its expiry is %s, want pending", u.State)
	}
	left, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left by the PUT ended at its upload's expiry: %v, %v", left, err)
	}
}
