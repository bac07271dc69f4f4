package client_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
)

// noContentRange hides the Content-Range of a 416, as an object store or
// proxy that does not say the file's size answers.
type noContentRange struct{ http.ResponseWriter }

func (w noContentRange) WriteHeader(code int) {
	if code == http.StatusRequestedRangeNotSatisfiable {
		w.Header().Del("Content-Range")
	}
	w.ResponseWriter.WriteHeader(code)
}

// uploadBehindProxy starts a node, uploads a text file into a group of
// users 1 and 2 as user 1, whose HTTP requests go through a proxy that
// serves them with serve, and returns that client, the proxy, the
// attachment and its bytes.
func uploadBehindProxy(t *testing.T, serve func(w http.ResponseWriter, r *http.Request, upstream http.Handler)) (*client.Client, *httpRecorder, client.Attachment, []byte) {
	t.Helper()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	rec := newHTTPRecorder(t, "http://"+srv.HTTPAddr(), func(w http.ResponseWriter, r *http.Request, upstream http.Handler) bool {
		serve(w, r, upstream)
		return true
	})
	alice := connectHTTP(t, srv, 1, rec.URL)
	data := bytes.Repeat([]byte("resume "), 300)
	a, err := alice.Upload(ctxFor(t, 30*time.Second), g.ID, "notes.txt", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return alice, rec, a, data
}

// TestResumingPastTheEndFailsWhenThe416DoesNotSayTheSize: DownloadFrom
// at an offset past the attachment's end (the file on disk is not this
// attachment) fails with ErrInvalid. A 416 that does not say the size
// (no Content-Range, as some object stores and proxies answer) is no
// proof the offset is at the end: it must not count as a finished
// download.
func TestResumingPastTheEndFailsWhenThe416DoesNotSayTheSize(t *testing.T) {
	t.Parallel()
	alice, _, a, data := uploadBehindProxy(t, func(w http.ResponseWriter, r *http.Request, upstream http.Handler) {
		upstream.ServeHTTP(noContentRange{w}, r)
	})
	ctx := ctxFor(t, 30*time.Second)

	if info, err := alice.DownloadFrom(ctx, a.ID, io.Discard, a.Size+10); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("DownloadFrom past the end (%d of %d bytes), answered 416 without Content-Range: %+v, %v; want ErrInvalid", a.Size+10, a.Size, info, err)
	}
	if info, err := alice.DownloadFrom(ctx, a.ID, io.Discard, a.Size); err != nil || info.Written != 0 || info.Size != a.Size {
		t.Fatalf("DownloadFrom at the end, answered 416 without Content-Range: %+v, %v; want nothing written, size %d", info, err, a.Size)
	}
	var rest bytes.Buffer
	if info, err := alice.DownloadFrom(ctx, a.ID, &rest, 100); err != nil || info.Written != a.Size-100 || !bytes.Equal(rest.Bytes(), data[100:]) {
		t.Fatalf("DownloadFrom 100: %+v, %v", info, err)
	}
}

// TestResumingPastTheEndFailsWhenTheRangeIsIgnored: a proxy that drops
// the Range header gets the whole file (200) for DownloadFrom. From an
// offset past the file's end (the file on disk is not this attachment)
// that is ErrInvalid at once, as chatd's own 416 makes it, not a
// download cut short and resumed until the attempts run out.
func TestResumingPastTheEndFailsWhenTheRangeIsIgnored(t *testing.T) {
	t.Parallel()
	alice, rec, a, data := uploadBehindProxy(t, func(w http.ResponseWriter, r *http.Request, upstream http.Handler) {
		r.Header.Del("Range")
		upstream.ServeHTTP(w, r)
	})
	ctx := ctxFor(t, 30*time.Second)

	before := len(rec.of(http.MethodGet))
	if info, err := alice.DownloadFrom(ctx, a.ID, io.Discard, a.Size+10); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("DownloadFrom past the end (%d of %d bytes), the Range ignored: %+v, %v; want ErrInvalid", a.Size+10, a.Size, info, err)
	}
	if n := len(rec.of(http.MethodGet)) - before; n != 1 {
		t.Fatalf("%d GETs for an offset past the end, want 1", n)
	}
	var rest bytes.Buffer
	if info, err := alice.DownloadFrom(ctx, a.ID, &rest, 100); err != nil || info.Written != a.Size-100 || !bytes.Equal(rest.Bytes(), data[100:]) {
		t.Fatalf("DownloadFrom 100, the Range ignored: %+v, %v", info, err)
	}
	if info, err := alice.DownloadFrom(ctx, a.ID, io.Discard, a.Size); err != nil || info.Written != 0 || info.Size != a.Size {
		t.Fatalf("DownloadFrom at the end, the Range ignored: %+v, %v", info, err)
	}
}
