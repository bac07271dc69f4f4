package client_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAnUploadsPUTAnObjectStoreAnswers429IsSentAgainAfterItsRetryAfter:
// an upload's bytes go straight to the object store when chatd keeps its
// files there, and an object store asks a client over its request rate
// to come back later with 429 and Retry-After, as chatd does. Upload
// sends the PUT again after that wait (package doc, "Retry later"),
// rather than returning the answer as an invalid request.
func TestAnUploadsPUTAnObjectStoreAnswers429IsSentAgainAfterItsRetryAfter(t *testing.T) {
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	// In front of the store: the first presigned PUT (the client's) is
	// answered 429; everything else goes through, Host kept, so the
	// signatures hold.
	var limited atomic.Int32
	target, _ := url.Parse("http://" + fake.Endpoint())
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != "" && limited.CompareAndSwap(0, 1) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_S3_ENDPOINT": front.Listener.Addr().String(), "CHAT_S3_BUCKET": fake.Bucket, "CHAT_S3_USE_TLS": "false",
		"CHAT_S3_ACCESS_KEY": fake.AccessKey, "CHAT_S3_SECRET_KEY": fake.SecretKey}), nil)
	g := groupOf12(t, srv)
	alice := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))

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
