package client_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// An object-store upload's completion whose connection drops while chatd
// copies the bytes is sent again on the next connection, to another node
// of the cluster, while the first still runs: the first completes the
// upload and deletes the object under the URL, so the second finds
// nothing there and answers 400 invalid ("no bytes yet"), though the
// upload is complete with the file. Upload returns that upload, as the
// lost reply would have been, rather than fail it (the caller's Upload
// again took a new ticket, the file stored and charged twice). One PUT,
// one upload.
func TestAnUploadWhoseCompletionSentAgainFindsTheBytesTakenByTheFirstReturnsTheUpload(t *testing.T) {
	t.Parallel()
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	target, _ := url.Parse("http://" + fake.Endpoint())
	rp := httputil.NewSingleHostReverseProxy(target)

	puts := &atomic.Int32{}
	var mu sync.Mutex
	object := ""                   // the path of the client's PUT
	heads := 0                     // of object, by the other node
	copying := make(chan struct{}) // the first completion reads the bytes
	release := make(chan struct{}) // it may go on
	deleted := make(chan struct{}) // it completed the upload and deleted the object
	var copyOnce, releaseOnce, deleteOnce sync.Once
	wait := func(ch <-chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Errorf("the store's front waited 30s for %s", what)
		}
	}
	mine := func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		return r.URL.Path == object
	}
	// Each node reaches the store through a front of its own (the
	// requests keep their Host, so the signatures hold).
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != "":
			puts.Add(1)
			mu.Lock()
			object = r.URL.Path
			mu.Unlock()
		case r.Method == http.MethodGet && mine(r):
			// The first completion reads the bytes to copy them: its
			// client's connection drops meanwhile.
			copyOnce.Do(func() { close(copying) })
			wait(release, "the completion sent again")
		case r.Method == http.MethodDelete && mine(r):
			rp.ServeHTTP(w, r)
			deleteOnce.Do(func() { close(deleted) })
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(first.Close)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && mine(r) {
			mu.Lock()
			heads++
			mu.Unlock()
			// The completion sent again looks under the URL: the first
			// finishes before it does.
			releaseOnce.Do(func() { close(release) })
			wait(deleted, "the first completion to delete the object")
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(second.Close)
	envOf := func(front *httptest.Server, node string) map[string]string {
		return map[string]string{"CHAT_NODE_ID": node,
			"CHAT_S3_ENDPOINT": front.Listener.Addr().String(), "CHAT_S3_BUCKET": fake.Bucket, "CHAT_S3_USE_TLS": "false",
			"CHAT_S3_ACCESS_KEY": fake.AccessKey, "CHAT_S3_SECRET_KEY": fake.SecretKey}
	}
	db := pgtest.NewDB(t)
	srv := testnode.Start(t, testnode.SecretEnv(t, db, envOf(first, "first")), nil)
	other := testnode.Start(t, testnode.SecretEnv(t, db, envOf(second, "other")), nil)
	g := groupOf12(t, srv)
	px := newProxy(t, srv.MQTTAddr())
	alice := connect(t, testConfig(t, px.URL(), 1))

	go func() {
		select {
		case <-copying:
		case <-time.After(30 * time.Second):
			return
		}
		px.SetUpstream(other.MQTTAddr())
		px.Kill()
	}()
	ctx := ctxFor(t, 60*time.Second)
	data := []byte("the minutes, completed by the first completion\n")
	a, err := alice.Upload(ctx, g.ID, "minutes.txt", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload whose completion sent again found the bytes taken by the first: %v", err)
	}
	if a.Size != int64(len(data)) {
		t.Fatalf("Upload returned %+v, want the %d bytes sent", a, len(data))
	}
	mu.Lock()
	head := heads
	mu.Unlock()
	if head == 0 {
		t.Fatal("the other node never looked under the URL: the completion was not sent again there")
	}
	uploadedOnce(t, ctx, srv, alice, g.ID, a, len(data), puts)
}
