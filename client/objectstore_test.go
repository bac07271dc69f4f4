package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// storeBehind starts chatd keeping its files in an object store behind a
// front that hands each presigned PUT (a client's upload) to put first:
// put answers it and says true, or says false to let it through. Every
// other request goes through with its Host kept, so the signatures hold.
// It returns a group of users 1 and 2 and user 1's client.
func storeBehind(t *testing.T, put func(w http.ResponseWriter, r *http.Request) bool) (chat.Conversation, *client.Client) {
	t.Helper()
	srv := chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, store http.Handler) {
		if r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != "" && put(w, r) {
			return
		}
		store.ServeHTTP(w, r)
	})
	return groupOf12(t, srv), connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
}

// chatdOnFrontedStore starts chatd keeping its files in an in-process
// object store behind a front: handle sees every request first, with the
// store (a proxy that keeps the Host, so the signatures hold) to hand it
// on to.
func chatdOnFrontedStore(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, store http.Handler)) *server.Server {
	t.Helper()
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	target, _ := url.Parse("http://" + fake.Endpoint())
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, rp) }))
	t.Cleanup(front.Close)
	return testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_S3_ENDPOINT": front.Listener.Addr().String(), "CHAT_S3_BUCKET": fake.Bucket, "CHAT_S3_USE_TLS": "false",
		"CHAT_S3_ACCESS_KEY": fake.AccessKey, "CHAT_S3_SECRET_KEY": fake.SecretKey}), nil)
}

// TestAnUploadsPUTAnObjectStoreAnswers429IsSentAgainAfterItsRetryAfter:
// an upload's bytes go straight to the object store when chatd keeps its
// files there, and an object store asks a client over its request rate
// to come back later with 429 and Retry-After, as chatd does. Upload
// sends the PUT again after that wait (package doc, "Retry later"),
// rather than returning the answer as an invalid request.
func TestAnUploadsPUTAnObjectStoreAnswers429IsSentAgainAfterItsRetryAfter(t *testing.T) {
	t.Parallel()
	// The first presigned PUT (the client's) is answered 429.
	var limited atomic.Int32
	g, alice := storeBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !limited.CompareAndSwap(0, 1) {
			return false
		}
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
		return true
	})

	start := time.Now()
	a, err := alice.Upload(ctxFor(t, 30*time.Second), g.ID, "notes.txt", bytes.NewReader([]byte("the object store was busy")))
	if err != nil {
		t.Fatalf("upload whose PUT the object store answered 429 (Retry-After: 1): %v", err)
	}
	if limited.Load() != 1 {
		t.Fatal("the object store's 429 was never answered: the upload did not go through it")
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("the PUT was sent again after %v, before the Retry-After of 1s", d)
	}
	if a.Size != int64(len("the object store was busy")) {
		t.Fatalf("upload %+v", a)
	}
}

// TestAnObjectStoresRequestTimeoutOnAPUTIsSentAgain: an object store that
// waited too long for a slow PUT's bytes answers 400 with the S3 code
// RequestTimeout in its XML (or 408): the network was slow, not the
// request wrong, and the same PUT sent again goes through. Upload sends
// it again rather than returning it as an invalid request.
func TestAnObjectStoresRequestTimeoutOnAPUTIsSentAgain(t *testing.T) {
	t.Parallel()
	// In front of the store: the next presigned PUT is answered with
	// the status in fail (once); everything else goes through.
	var fail, puts atomic.Int32
	g, alice := storeBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		puts.Add(1)
		if status := fail.Swap(0); status != 0 {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(int(status))
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>RequestTimeout</Code><Message>Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.</Message></Error>`))
			return true
		}
		return false
	})

	for _, status := range []int32{http.StatusBadRequest, http.StatusRequestTimeout} {
		fail.Store(status)
		before := puts.Load()
		body := fmt.Sprintf("sent over a slow network (%d)", status)
		a, err := alice.Upload(ctxFor(t, 30*time.Second), g.ID, "notes.txt", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Errorf("upload whose PUT the object store answered %d RequestTimeout: %v", status, err)
			continue
		}
		if n := puts.Load() - before; n != 2 {
			t.Errorf("answered %d RequestTimeout, the PUT was sent %d times, want 2", status, n)
		}
		if a.Size != int64(len(body)) {
			t.Errorf("upload %+v", a)
		}
	}
}

// TestAnObjectStoresExpiredTokenOnAPUTGetsANewTicket: a presigned URL
// signed with temporary credentials (an IAM role's) that ran out before
// the URL did is answered 400 ExpiredToken by S3: the request is not
// wrong, its signature is stale, as a 403's is. Upload asks for a new
// ticket (signed with fresh credentials) and sends the PUT again, rather
// than returning the answer as an invalid request.
func TestAnObjectStoresExpiredTokenOnAPUTGetsANewTicket(t *testing.T) {
	t.Parallel()
	var expired, puts atomic.Int32
	g, alice := storeBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		puts.Add(1)
		if expired.CompareAndSwap(0, 1) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>`))
			return true
		}
		return false
	})

	a, err := alice.Upload(ctxFor(t, 30*time.Second), g.ID, "notes.txt", bytes.NewReader([]byte("signed with a stale token")))
	if err != nil {
		t.Fatalf("upload whose PUT the object store answered 400 ExpiredToken: %v", err)
	}
	if n := puts.Load(); n != 2 {
		t.Fatalf("the PUT was sent %d times, want 2", n)
	}
	if a.Size != int64(len("signed with a stale token")) {
		t.Fatalf("upload %+v", a)
	}
}

// TestAnUploadWhosePUTsAreAllRefusedSaysWhy: an object store that refuses
// every PUT's signature (403, a bucket policy, a clock far off) gets a
// new ticket each time, until the attempts are spent; then Upload returns
// the store's last answer, which says why, not an error wrapping nothing.
func TestAnUploadWhosePUTsAreAllRefusedSaysWhy(t *testing.T) {
	t.Parallel()
	var puts atomic.Int32
	g, alice := storeBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		puts.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		return true
	})

	_, err := alice.UploadWithOptions(ctxFor(t, 30*time.Second), g.ID, "notes.txt", bytes.NewReader([]byte("refused")), client.UploadOptions{Attempts: 3})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != "gone" || e.Status != http.StatusForbidden || !strings.Contains(e.Message, "AccessDenied") {
		t.Fatalf("upload whose every PUT was refused 403: %v (%#v), want the store's 403 AccessDenied (gone)", err, e)
	}
	if n := puts.Load(); n != 3 {
		t.Fatalf("the PUT was sent %d times, want 3 (the attempts)", n)
	}
}

// TestAnUploadWhoseLastPUTFindsItsURLExpiredTakesNoTicketItCannotUse: an
// object store answers every PUT 403 "Request has expired" (the URL's
// life is over by the time the bytes come: a slow network, a clock far
// off), which is gone: the next attempt sends the file to a new ticket's
// URL. On the Upload's last attempt no new ticket is taken: no attempt
// is left to send the file to it. One was, an upload charged against the
// day's bytes (and the upload rate) that nothing was ever sent to, on
// top of the Upload failing.
func TestAnUploadWhoseLastPUTFindsItsURLExpiredTakesNoTicketItCannotUse(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var urls []string
	srv := chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, store http.Handler) {
		if r.Method != http.MethodPut || r.URL.Query().Get("X-Amz-Signature") == "" {
			store.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		urls = append(urls, r.URL.Path)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`))
	})
	g := groupOf12(t, srv)
	alice := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	data := []byte("sent after its URL expired, every time")
	_, err := alice.UploadWithOptions(ctxFor(t, 30*time.Second), g.ID, "notes.txt", bytes.NewReader(data), client.UploadOptions{Attempts: 2})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != "gone" || e.Status != http.StatusForbidden || !strings.Contains(e.Message, "Request has expired") {
		t.Fatalf("upload whose every PUT found its URL expired: %v (%#v), want the store's 403 (gone)", err, e)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(urls) != 2 || urls[0] == urls[1] {
		t.Fatalf("PUTs to %v, want 2 (the attempts), the second to a new ticket's URL", urls)
	}
	if uploads, charged := uploadsOf(t, srv); uploads != 2 || charged != 2*int64(len(data)) {
		t.Fatalf("%d uploads of user 1 charged %d bytes after the Upload failed, want 2 and %d: a ticket was taken that no attempt was left to send the file to", uploads, charged, 2*len(data))
	}
}
