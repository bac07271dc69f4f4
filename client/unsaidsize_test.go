package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
)

// downloadPastTheEnd resumes a download at byte 100 through a proxy that
// answers every attachment GET with serve, and returns how many
// GETs the proxy saw and the download's error.
func downloadPastTheEnd(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) (gets int32, err error) {
	t.Helper()
	srv := startNode(t, pgtest.NewDB(t))
	var seen atomic.Int32
	rec := newHTTPRecorder(t, "http://"+srv.HTTPAddr(), func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/v1/attachments/") {
			return false
		}
		seen.Add(1)
		serve(w, r)
		return true
	})
	alice := connectHTTP(t, srv, 1, rec.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = alice.DownloadFrom(ctx, "00000000-0000-0000-0000-000000000000", io.Discard, 100)
	return seen.Load(), err
}

// TestADownloadWhoseSizeIsNeverSaidFailsAtOnce: resuming past what a
// proxy serves, it answers 416 without the Content-Range that says the
// size, and the size asked for (the first byte) comes without one too.
// Asking again gets the same answer: the download fails at once with
// ErrInvalid, not after eight tries as if the network had failed.
func TestADownloadWhoseSizeIsNeverSaidFailsAtOnce(t *testing.T) {
	t.Parallel()
	gets, err := downloadPastTheEnd(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") == "bytes=0-0" {
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write([]byte("x"))
			return
		}
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
	})
	if !errors.Is(err, client.ErrInvalid) {
		t.Errorf("a download whose size is never said: %v, want ErrInvalid", err)
	}
	if gets != 2 {
		t.Errorf("%d GETs, want 2 (the download and the size asked for)", gets)
	}
}

// TestAResumedDownloadPastTheEndOfAFileOfUnsaidSizeFailsAtOnce: a proxy
// that ignores the Range and sends the whole file without its length
// (chunked) sends less than the offset to resume from: the file on disk
// is longer than the attachment. The body ended cleanly, so asking again
// gets the same: the download fails at once with ErrInvalid, not after
// eight tries as if the network had cut it.
func TestAResumedDownloadPastTheEndOfAFileOfUnsaidSizeFailsAtOnce(t *testing.T) {
	t.Parallel()
	gets, err := downloadPastTheEnd(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ten bytes!"))
		http.NewResponseController(w).Flush() // chunked: no Content-Length
	})
	if !errors.Is(err, client.ErrInvalid) {
		t.Errorf("a download resumed past the end of a file of unsaid size: %v, want ErrInvalid", err)
	}
	if gets != 1 {
		t.Errorf("%d GETs, want 1", gets)
	}
}
