package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// expireURL makes the URL of upload id expire now on chatd, as the
// passing of its upload_url_expiry would: chatd reads the expiry from
// the upload's row at every PUT.
func expireURL(t *testing.T, srv *server.Server, id string) {
	t.Helper()
	if _, err := srv.Pool.Exec(context.Background(), `UPDATE attachment SET url_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Errorf("expire the URL of upload %s: %v", id, err)
	}
}

// uploadsOf counts user 1's uploads and the bytes charged for them.
func uploadsOf(t *testing.T, srv *server.Server) (uploads, charged int64) {
	t.Helper()
	if err := srv.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM attachment WHERE uploader_id = 1),
		(SELECT COALESCE(sum(bytes), 0) FROM upload_quota WHERE user_id = 1)`).Scan(&uploads, &charged); err != nil {
		t.Fatal(err)
	}
	return uploads, charged
}

// firstPutTo is a proxy in front of srv that hands the first PUT to
// first (given chatd, to which it may pass it on) and forwards every
// other request to chatd; puts counts the PUTs it got.
func firstPutTo(t *testing.T, srv *server.Server, first func(w http.ResponseWriter, r *http.Request, chatd http.Handler)) (lb *httpRecorder, puts *atomic.Int32) {
	puts = &atomic.Int32{}
	lb = newHTTPRecorder(t, "http://"+srv.HTTPAddr(), func(w http.ResponseWriter, r *http.Request, chatd http.Handler) bool {
		if r.Method != http.MethodPut || puts.Add(1) > 1 {
			return false
		}
		first(w, r, chatd)
		return true
	})
	return lb, puts
}

// storedThenLost is a proxy in front of srv whose first PUT chatd stores
// but whose answer never reaches the client (the connection is cut);
// then, before the client can send it again, after runs (given the
// upload's id). puts counts the PUTs.
func storedThenLost(t *testing.T, srv *server.Server, after func(id string)) (lb *httpRecorder, firstID *atomic.Value, puts *atomic.Int32) {
	firstID = &atomic.Value{}
	lb, puts = firstPutTo(t, srv, func(w http.ResponseWriter, r *http.Request, chatd http.Handler) {
		rec := httptest.NewRecorder()
		chatd.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("first PUT answered %d: %s", rec.Code, rec.Body)
		}
		id := path.Base(r.URL.Path)
		firstID.Store(id)
		after(id)
		dropConnection(w)
	})
	return lb, firstID, puts
}

// A PUT whose answer was lost stored the file; sent again once the
// upload's URL expired, it is answered 410 (chatd reads none of it,
// whatever the upload's state). Upload reads the upload, finds it
// complete with the file, and returns it as if the first answer had
// come: one upload, charged once, which a message then carries (before,
// it took a new ticket and uploaded the file again).
func TestAnUploadStoredWhoseRetryFindsItsURLExpiredIsReturnedNotUploadedAgain(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	lb, firstID, _ := storedThenLost(t, srv, func(id string) { expireURL(t, srv, id) })
	alice := connectHTTP(t, srv, 1, lb.URL)
	ctx := ctxFor(t, 30*time.Second)
	data := mediatest.PNG(64, 64)
	a, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload of a stored file retried after its URL expired: %v", err)
	}
	if id, _ := firstID.Load().(string); a.ID != id || a.Size != int64(len(data)) || a.ContentType != "image/png" {
		t.Fatalf("Upload returned %+v, want upload %s of %d bytes of image/png", a, id, len(data))
	}
	puts := lb.of(http.MethodPut)
	if len(puts) != 2 || puts[1].status != http.StatusGone {
		t.Fatalf("PUTs %+v, want the one whose answer was lost and its retry answered 410", puts)
	}
	if uploads, charged := uploadsOf(t, srv); uploads != 1 || charged != int64(len(data)) {
		t.Fatalf("one file made %d uploads and charged %d bytes, want 1 and %d", uploads, charged, len(data))
	}
	sendUpload(t, ctx, alice, g.ID, a, "send the upload")
}

// The same, the retry due when the ticket is about to expire (within 30
// s of it): Upload reads the upload before it asks for a new ticket, and
// finds it complete. The ticket's short life is chatd's: the upload's
// URL is made to expire 20 s on while its ticket's reply is on the way
// (the reply is lost, and asked again with its key, chatd answers the
// upload's expiry as it stands).
func TestAnUploadStoredWhoseRetryIsDueAsItsURLExpiresIsReturnedNotUploadedAgain(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	lb, firstID, _ := storedThenLost(t, srv, func(string) {})
	alice := connectHTTP(t, srv, 1, lb.URL)
	var shortened atomic.Bool
	alice.DropReplies(func(p []byte) bool {
		var ticket struct {
			UploadID string `json:"uploadId"`
			URL      string `json:"url"`
		}
		if json.Unmarshal(p, &ticket) != nil || ticket.UploadID == "" || ticket.URL == "" || !shortened.CompareAndSwap(false, true) {
			return false
		}
		if _, err := srv.Pool.Exec(context.Background(), `UPDATE attachment SET url_expires_at = now() + interval '20 seconds' WHERE id = $1`, ticket.UploadID); err != nil {
			t.Errorf("shorten the URL of upload %s: %v", ticket.UploadID, err)
		}
		go alice.TerminateConnection()
		return true
	})
	ctx := ctxFor(t, 30*time.Second)
	data := mediatest.PNG(64, 64)
	a, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload of a stored file retried as its URL expires: %v", err)
	}
	if !shortened.Load() {
		t.Fatal("the ticket's reply was never seen: its URL was not shortened")
	}
	if id, _ := firstID.Load().(string); a.ID != id {
		t.Fatalf("Upload returned upload %s, want %s, the one stored", a.ID, id)
	}
	if uploads, charged := uploadsOf(t, srv); uploads != 1 || charged != int64(len(data)) {
		t.Fatalf("one file made %d uploads and charged %d bytes, want 1 and %d", uploads, charged, len(data))
	}
	if n := len(lb.of(http.MethodPut)); n != 1 {
		t.Fatalf("%d PUTs, want only the one whose answer was lost", n)
	}
}

// An upload whose URL expired before its bytes arrived is still pending:
// Upload takes a new ticket and sends the file there, as before.
func TestAnUploadWhoseURLExpiredBeforeItsBytesArrivedIsSentWithANewTicket(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	var first atomic.Value
	lb, _ := firstPutTo(t, srv, func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		// Cut before it reached chatd, and the URL expires meanwhile.
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		first.Store(path.Base(r.URL.Path))
		expireURL(t, srv, path.Base(r.URL.Path))
		dropConnection(w)
	})
	alice := connectHTTP(t, srv, 1, lb.URL)
	ctx := ctxFor(t, 30*time.Second)
	data := mediatest.PNG(64, 64)
	a, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload whose first URL expired before its bytes came: %v", err)
	}
	if id, _ := first.Load().(string); a.ID == id || a.Size != int64(len(data)) {
		t.Fatalf("Upload returned %+v: want a new upload, not %s", a, id)
	}
	if puts := lb.of(http.MethodPut); len(puts) != 3 || puts[1].status != http.StatusGone || puts[2].status != http.StatusOK {
		t.Fatalf("PUTs %+v, want the cut one, its retry answered 410 and the new ticket's", puts)
	}
	sendUpload(t, ctx, alice, g.ID, a, "send the upload")
}

// A PUT whose answer was lost stored the file, which was then sent (here
// by the uploader itself, as another of its sessions could not: the
// upload's id went nowhere else). Its retry after the URL expired is no
// reason to upload the file again: Upload fails, saying what became of
// it (before, it uploaded the file again as a new upload).
func TestAnUploadSentAlreadyWhoseRetryFindsItsURLExpiredFailsSayingSo(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	var alice *client.Client
	sent := make(chan error, 1)
	lb, _, _ := storedThenLost(t, srv, func(id string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := alice.SendMessage(ctx, g.ID, "", client.SendOptions{Attachments: []client.AttachmentRef{{UploadID: id}}})
		sent <- err
		expireURL(t, srv, id)
	})
	alice = connectHTTP(t, srv, 1, lb.URL)
	ctx := ctxFor(t, 30*time.Second)
	_, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(mediatest.PNG(64, 64)))
	if err := <-sent; err != nil {
		t.Fatalf("send the upload: %v", err)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || !errors.Is(err, client.ErrInvalid) || !strings.Contains(ce.Message, "sent already") {
		t.Fatalf("Upload of a file sent already: %v, want a conflict saying it was sent", err)
	}
	if uploads, _ := uploadsOf(t, srv); uploads != 1 {
		t.Fatalf("%d uploads, want 1: the file was uploaded again", uploads)
	}
}
