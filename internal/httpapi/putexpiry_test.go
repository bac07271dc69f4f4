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

	r, took, err := e.rawPut(member, tk.UploadID, size, trickle(size, chunk, every))
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

// trickle is a PUT's body of size bytes "x", sent chunk bytes every
// every.
func trickle(size, chunk int, every time.Duration) func(w io.Writer, stop <-chan struct{}) {
	return func(w io.Writer, stop <-chan struct{}) {
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
	}
}

// TestAPutOfACompleteUploadIsBoundByItsExpiresAt: a PUT of an upload
// complete already (a retry whose first answer was lost) had its body
// read whole to compare it with the upload's, whenever it came and for as
// long as its client sent above the minimum: one sending at 16 KiB a
// minute held a handler and a connection for a day past expiresAt, and
// one after it was read as well, for as long as the upload lived (an
// attached one: for ever). Its bytes must arrive by expiresAt as the
// first PUT's must: one still sending then ends 410 gone, one after it is
// 410 gone at once, its body unread; the upload stays complete.
func TestAPutOfACompleteUploadIsBoundByItsExpiresAt(t *testing.T) {
	e := newEnv(t)
	e.withAttachmentsConfig(attach.Config{URLExpiry: 4 * time.Second})
	g := e.group(owner, member)
	// The same bytes as the first PUT's, 16 KiB every 100 ms: 2 MiB take
	// 12.8 s, past expiresAt and past rawPut's 10 s wait for an answer.
	const chunk, every, size = 16 << 10, 100 * time.Millisecond, 2 << 20
	id := e.textTicket(member, g, size)
	var u chat.Upload
	if r := e.do(member, "PUT", "/v1/uploads/"+id, bytes.Repeat([]byte("x"), size), withHeader("Content-Type", "text/plain")); r.status != http.StatusOK {
		t.Fatalf("PUT upload: %d %s", r.status, truncate(r.body))
	} else {
		r.decode(t, &u)
	}
	// gone checks that the PUT again, begun at start, was answered 410
	// gone by the latest at by.
	gone := func(what string, start, by time.Time, r resp, err error) {
		t.Helper()
		answered := time.Now()
		switch {
		case err != nil:
			t.Errorf("%s: no answer %v after it began (expiresAt %s): %v", what, answered.Sub(start).Round(time.Millisecond), u.ExpiresAt.Format(time.RFC3339), err)
		case r.status != http.StatusGone || r.errorCode() != "gone":
			t.Errorf("%s: %d %s, want 410 gone", what, r.status, truncate(r.body))
		case answered.After(by):
			t.Errorf("%s: answered %v after it began, %v after expiresAt, want by %v after it", what,
				answered.Sub(start).Round(time.Millisecond), answered.Sub(u.ExpiresAt).Round(time.Millisecond), by.Sub(u.ExpiresAt))
		default:
			t.Logf("%s: %d %s, %v after it began", what, r.status, bytes.TrimSpace(r.body), answered.Sub(start).Round(time.Millisecond))
		}
	}

	start := time.Now()
	r, _, err := e.rawPut(member, id, size, trickle(size, chunk, every))
	gone("a complete upload PUT again, still sending at its expiresAt", start, u.ExpiresAt.Add(time.Second), r, err)
	// Past expiresAt, a PUT that sends nothing of its body: were it read,
	// it would wait the idle time (60 s).
	if d := time.Until(u.ExpiresAt); d >= 0 {
		time.Sleep(d + time.Millisecond)
	}
	start = time.Now()
	r, _, err = e.rawPut(member, id, size, func(_ io.Writer, stop <-chan struct{}) { <-stop })
	gone("a complete upload PUT again after its expiresAt, sending nothing", start, start.Add(time.Second), r, err)
	e.must(http.StatusOK, member, "GET", "/v1/uploads/"+id, nil, &u)
	if u.State != chat.UploadComplete {
		t.Errorf("the upload PUT again after its expiresAt is %s, want complete as it was", u.State)
	}
}
