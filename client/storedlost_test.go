package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/server"
)

// storeTookItAnswerLost starts chatd keeping its files in an object store
// behind a front whose first presigned PUT the store takes, its answer
// cut off on the way back (the connection dropped), after after ran
// (given chatd, while the client waits for the answer). A later PUT goes
// to the store or, to the first one's URL when refused, is answered 403
// as a store answers a URL that expired. It returns chatd and the count
// of PUTs the front got.
func storeTookItAnswerLost(t *testing.T, refused bool, after func(srv *server.Server)) (*server.Server, *atomic.Int32) {
	t.Helper()
	puts := &atomic.Int32{}
	var srv atomic.Pointer[server.Server]
	var first atomic.Value // the first PUT's object
	srv.Store(chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, rp http.Handler) {
		if r.Method != http.MethodPut || r.URL.Query().Get("X-Amz-Signature") == "" {
			rp.ServeHTTP(w, r)
			return
		}
		switch n := puts.Add(1); {
		case n == 1:
			first.Store(r.URL.Path)
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Errorf("the store answered the first PUT %d: %s", rec.Code, rec.Body)
			}
			after(srv.Load())
			dropConnection(w)
		case refused && first.Load() == r.URL.Path:
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`))
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	return srv.Load(), puts
}

// An upload's bytes go straight to the object store, which took them,
// but its answer to the PUT was lost (the connection dropped): chatd
// learns of the bytes from the completion only, which the client never
// sent. Upload completes them, rather than PUT the file again (before,
// it sent every byte a second time), or, once the URL expired (the store
// refuses it), read the upload (pending: chatd knows nothing of the
// bucket) and take a new ticket, storing the file twice and charging it
// twice against the day's bytes. One PUT, one upload, charged once,
// which a message carries.
func TestAnObjectStoreUploadWhoseStoreAnswerWasLostIsCompletedNotSentAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what    string
		expired bool
	}{{"while its URL is valid", false}, {"after its URL expired", true}} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			srv, puts := storeTookItAnswerLost(t, c.expired, func(srv *server.Server) {
				if c.expired {
					expireURL(t, srv, pendingUpload(t, srv))
				}
			})
			g := groupOf12(t, srv)
			alice := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
			ctx := ctxFor(t, 30*time.Second)
			data := []byte("the minutes of the meeting, sent once\n")
			a, err := alice.Upload(ctx, g.ID, "minutes.txt", bytes.NewReader(data))
			if err != nil {
				t.Fatalf("Upload whose bytes the store took, its answer lost: %v", err)
			}
			sum := sha256.Sum256(data)
			if a.Size != int64(len(data)) || a.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("Upload returned %+v, want the %d bytes sent", a, len(data))
			}
			uploadedOnce(t, ctx, srv, alice, g.ID, a, len(data), puts)
		})
	}
}

// pendingUpload is the id of user 1's one pending upload.
func pendingUpload(t *testing.T, srv *server.Server) string {
	t.Helper()
	var id string
	if err := srv.Pool.QueryRow(t.Context(), `SELECT id FROM attachment WHERE uploader_id = 1 AND state = 'pending'`).Scan(&id); err != nil {
		t.Errorf("user 1's pending upload: %v", err)
	}
	return id
}

// TestAnObjectStoreUploadSentMeanwhileSaysSoNotThatItsURLExpired: the
// store took the bytes, its answer lost, and the upload was completed and
// sent in a message meanwhile (by another client of the user's) while
// its URL is still valid. Upload's completion finds it sent already and
// fails saying that, and why the upload was read (bytes sent before,
// their answer lost), not that its URL expired, which it did not.
func TestAnObjectStoreUploadSentMeanwhileSaysSoNotThatItsURLExpired(t *testing.T) {
	t.Parallel()
	var conv atomic.Int64
	srv, puts := storeTookItAnswerLost(t, false, func(srv *server.Server) {
		ctx := t.Context()
		id := pendingUpload(t, srv)
		if _, err := srv.Service.CompleteUpload(ctx, 1, id); err != nil {
			t.Errorf("complete upload %s: %v", id, err)
			return
		}
		if _, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.Load(), SenderID: 1, ClientMsgID: uuid.NewString(),
			Attachments: []chat.AttachmentRef{{UploadID: id}}}); err != nil {
			t.Errorf("send upload %s: %v", id, err)
		}
	})
	g := groupOf12(t, srv)
	conv.Store(g.ID)
	alice := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	a, err := alice.Upload(ctxFor(t, 30*time.Second), g.ID, "minutes.txt", bytes.NewReader([]byte("sent from elsewhere meanwhile\n")))
	if err == nil {
		t.Fatalf("Upload of a file sent meanwhile: %+v, want an error saying it was sent already", a)
	}
	if msg := err.Error(); !strings.Contains(msg, "sent already, in message") || strings.Contains(msg, "expired") {
		t.Errorf("Upload of a file sent meanwhile, its URL valid: %q, want it sent already and nothing of an expiry", msg)
	}
	if ce := (*client.Error)(nil); !errors.As(err, &ce) || ce.Code != "conflict" || ce.Status != http.StatusConflict {
		t.Errorf("Upload of a file sent meanwhile: %#v, want a conflict, status 409 (not the 410 of a URL expired)", err)
	}
	if n := puts.Load(); n != 1 {
		t.Errorf("the file was PUT %d times, want once", n)
	}
}

// uploadedOnce checks that an upload of size bytes was PUT once (the store
// held it after the first), made one upload charged once against the
// day's bytes, and that a message carries it.
func uploadedOnce(t *testing.T, ctx context.Context, srv *server.Server, c *client.Client, conv int64, a client.Attachment, size int, puts *atomic.Int32) {
	t.Helper()
	if n := puts.Load(); n != 1 {
		t.Errorf("the file was PUT %d times, want once: the store held it after the first", n)
	}
	if uploads, charged := uploadsOf(t, srv); uploads != 1 || charged != int64(size) {
		t.Errorf("one file made %d uploads and charged %d bytes, want 1 and %d", uploads, charged, size)
	}
	sendUpload(t, ctx, c, conv, a, "send the upload")
}

// The store took the bytes, and the completion finds chatd out of reach
// for longer than a request waits (the network down a while, as on a
// train; a context without deadline, so a request waits
// Config.RequestTimeout): the one the next attempt sends when the store's
// answer was lost, or the one after the store's 2xx. Upload completes
// them on a later attempt once chatd is back, rather than fail, whose
// caller's Upload again took a new ticket and stored and charged the file
// twice. One PUT, one upload.
func TestAnObjectStoreUploadWhoseCompletionFindsChatdOutOfReachCompletesItOnALaterAttempt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what string
		lost bool
	}{{"the store's answer lost", true}, {"the store's answer received", false}} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			var px atomic.Pointer[proxy]
			puts := &atomic.Int32{}
			srv := chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, rp http.Handler) {
				if r.Method != http.MethodPut || r.URL.Query().Get("X-Amz-Signature") == "" || puts.Add(1) > 1 {
					rp.ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				rp.ServeHTTP(rec, r)
				if rec.Code != http.StatusOK {
					t.Errorf("the store answered the first PUT %d: %s", rec.Code, rec.Body)
				}
				// chatd goes out of reach as the store answers, and
				// comes back after more than a request's wait.
				p := px.Load()
				p.Cut()
				time.AfterFunc(3*time.Second, p.Resume)
				if c.lost {
					dropConnection(w)
					return
				}
				w.WriteHeader(rec.Code)
			})
			g := groupOf12(t, srv)
			px.Store(newProxy(t, srv.MQTTAddr()))
			cfg := testConfig(t, px.Load().URL(), 1)
			cfg.RequestTimeout = 2 * time.Second
			alice := connect(t, cfg)
			// No deadline, as an app's upload that takes what it takes:
			// each request then waits RequestTimeout at most. Cancelled,
			// not deadlined, after a minute.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := time.AfterFunc(time.Minute, cancel)
			defer stop.Stop()
			data := []byte("the minutes, completed once chatd is back\n")
			a, err := alice.Upload(ctx, g.ID, "minutes.txt", bytes.NewReader(data))
			if err != nil {
				t.Fatalf("Upload whose completion found chatd out of reach for a while: %v", err)
			}
			if a.Size != int64(len(data)) {
				t.Fatalf("Upload returned %+v, want the %d bytes sent", a, len(data))
			}
			uploadedOnce(t, ctx, srv, alice, g.ID, a, len(data), puts)
		})
	}
}
