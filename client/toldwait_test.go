package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// httpCall is one request that went through an httpRecorder.
type httpCall struct {
	method     string
	start, end time.Time
	status     int
	retryAfter string
}

// httpRecorder is an HTTP proxy in front of chatd that notes every
// request and its answer; answer, when set, answers a request itself
// (true) instead of passing it on, as a load balancer would, or does
// something to it on its way to chatd (upstream) and back.
type httpRecorder struct {
	URL    string
	answer func(w http.ResponseWriter, r *http.Request, upstream http.Handler) bool
	mu     sync.Mutex
	calls  []httpCall
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newHTTPRecorder(t *testing.T, upstream string, answer func(w http.ResponseWriter, r *http.Request, upstream http.Handler) bool) *httpRecorder {
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	h := &httpRecorder{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := httpCall{method: r.Method, start: time.Now()}
		sw := &statusWriter{ResponseWriter: w}
		if h.answer == nil || !h.answer(sw, r, rp) {
			rp.ServeHTTP(sw, r)
		}
		call.end, call.status, call.retryAfter = time.Now(), sw.status, sw.Header().Get("Retry-After")
		if call.status == 0 {
			call.status = http.StatusOK
		}
		h.mu.Lock()
		h.calls = append(h.calls, call)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// dropConnection closes the connection under w without an answer, as a
// network that fails would.
func dropConnection(w http.ResponseWriter) {
	conn, _, _ := http.NewResponseController(w).Hijack()
	_ = conn.Close()
}

// of returns the requests of method so far, in order.
func (h *httpRecorder) of(method string) []httpCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []httpCall
	for _, c := range h.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// waitedAsTold fails t unless every request of method that followed a
// 429 or 503 began at least its Retry-After after that answer; it returns
// how many such refusals there were.
func waitedAsTold(t *testing.T, h *httpRecorder, method string) int {
	t.Helper()
	calls, refused := h.of(method), 0
	for i := 1; i < len(calls); i++ {
		prev := calls[i-1]
		if prev.status != http.StatusTooManyRequests && prev.status != http.StatusServiceUnavailable {
			continue
		}
		refused++
		s, err := strconv.Atoi(prev.retryAfter)
		if err != nil {
			t.Fatalf("%s answered %d with Retry-After %q", method, prev.status, prev.retryAfter)
		}
		if gap := calls[i].start.Sub(prev.end); gap < time.Duration(s)*time.Second {
			t.Errorf("%s sent again %v after a %d with Retry-After %d", method, gap, prev.status, s)
		}
	}
	return refused
}

// drainAPIBucket spends user's API tokens straight at chatd (not through
// the recorder) until chatd answers 429.
func drainAPIBucket(t *testing.T, httpURL string, user int64) {
	t.Helper()
	tok := testnode.Token(t, user)
	testkit.WaitFor(t, 10*time.Second, "the API bucket to be empty", func() bool {
		req, _ := http.NewRequest(http.MethodGet, httpURL+"/v1/uploads/00000000-0000-0000-0000-000000000000", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusTooManyRequests
	})
}

// TestAnUploadAndADownloadRefusedAsRateLimitedWaitTheirRetryAfter: chatd
// refuses an upload's ticket (RPC, error.retryAfter), its PUT and a
// download's GET (429, Retry-After) while the user's API bucket is empty.
// Upload and Download must ask again once the time chatd said has passed,
// not sooner (a retry before then is refused again and spends the
// attempts), nor give up on a refusal that only says "later".
func TestAnUploadAndADownloadRefusedAsRateLimitedWaitTheirRetryAfter(t *testing.T) {
	t.Parallel()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_LIMIT_API_RATE": "1", "CHAT_LIMIT_API_BURST": "1"}), nil)
	g := groupOf12(t, srv)
	chatd := "http://" + srv.HTTPAddr()
	rec := newHTTPRecorder(t, chatd, nil)
	alice := connectHTTP(t, srv, 1, rec.URL)
	ctx := ctxFor(t, 30*time.Second)

	drainAPIBucket(t, chatd, 1)
	data := mediatest.PNG(64, 64)
	a, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload refused for now: %v", err)
	}
	// The ticket spent the one token: its PUT was refused at first.
	if waitedAsTold(t, rec, http.MethodPut) == 0 {
		t.Fatalf("no PUT was refused (%+v): the test did not test", rec.of(http.MethodPut))
	}

	drainAPIBucket(t, chatd, 1)
	var buf bytes.Buffer
	if _, err := alice.Download(ctx, a.ID, &buf); err != nil {
		t.Fatalf("Download refused for now: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatal("downloaded bytes differ from the upload's")
	}
	if waitedAsTold(t, rec, http.MethodGet) == 0 {
		t.Fatalf("no GET was refused (%+v): the test did not test", rec.of(http.MethodGet))
	}
}

// TestWaitingOutARetryAfterEndsWhenTheContextIsCancelled: a load
// balancer answers every PUT and GET 503 with Retry-After 30 (a header
// only, no JSON body). Upload and Download wait the 30 s before asking
// again, and a context cancelled meanwhile ends that wait at once.
func TestWaitingOutARetryAfterEndsWhenTheContextIsCancelled(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	rec := newHTTPRecorder(t, "http://"+srv.HTTPAddr(), func(w http.ResponseWriter, _ *http.Request, _ http.Handler) bool {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return true
	})
	alice := connectHTTP(t, srv, 1, rec.URL)

	for _, c := range uploadAndDownload(alice, g.ID) {
		ctx, cancel := context.WithCancel(context.Background())
		// Cancelled 1 s after the first refusal: long enough for a retry
		// that did not wait as told.
		var cancelled atomic.Int64
		go func() {
			for len(rec.of(c.method)) == 0 && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // polled; the select below bounds it
			}
			time.AfterFunc(time.Second, func() { cancelled.Store(time.Now().UnixNano()); cancel() })
		}()
		done := make(chan error, 1)
		go func() { done <- c.run(ctx) }()
		select {
		case err := <-done:
			if cancelled.Load() == 0 {
				t.Fatalf("%s ended before its context was cancelled: %v", c.method, err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v, want context.Canceled", c.method, err)
			}
			if d := time.Since(time.Unix(0, cancelled.Load())); d > 500*time.Millisecond {
				t.Fatalf("%s returned %v after its context was cancelled", c.method, d)
			}
		case <-time.After(15 * time.Second):
			cancel()
			t.Fatalf("%s still waiting 15 s after it began", c.method)
		}
		if n := len(rec.of(c.method)); n != 1 {
			t.Fatalf("%d %ss within the Retry-After of the first", n, c.method)
		}
	}
}

// TestAnUploadOrADownloadToldToWaitBeyondTheCapOrItsContextReturnsTheRefusalAtOnce:
// a load balancer answers every PUT and GET 503 with a Retry-After the
// client does not sit out: an hour (beyond the 5 minutes it waits at
// most), or a minute when the context ends sooner. Upload and Download
// return the refusal at once, with its RetryAfter, as an upload's ticket
// refused so does, instead of waiting 5 minutes or until the context ends.
func TestAnUploadOrADownloadToldToWaitBeyondTheCapOrItsContextReturnsTheRefusalAtOnce(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	var retryAfter atomic.Int64
	rec := newHTTPRecorder(t, "http://"+srv.HTTPAddr(), func(w http.ResponseWriter, _ *http.Request, _ http.Handler) bool {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfter.Load(), 10))
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return true
	})
	alice := connectHTTP(t, srv, 1, rec.URL)

	for _, told := range []struct {
		name     string
		after    time.Duration
		deadline time.Duration // 0: none
	}{
		{"an hour", time.Hour, 0},
		{"a minute, the context ending sooner", time.Minute, 20 * time.Second},
	} {
		retryAfter.Store(int64(told.after / time.Second))
		for _, c := range uploadAndDownload(alice, g.ID) {
			t.Run(told.name+"/"+c.method, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				if told.deadline > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), told.deadline)
				}
				defer cancel()
				before := len(rec.of(c.method))
				done := make(chan error, 1)
				go func() { done <- c.run(ctx) }()
				select {
				case err := <-done:
					var e *client.Error
					if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.RetryAfter != told.after {
						t.Fatalf("%s refused with Retry-After %v: %v, want the refusal with RetryAfter %v", c.method, told.after, err, told.after)
					}
				case <-time.After(5 * time.Second):
					cancel()
					t.Fatalf("%s told to retry after %v still waiting 5 s later", c.method, told.after)
				}
				if n := len(rec.of(c.method)) - before; n != 1 {
					t.Fatalf("%d %ss, want 1", n, c.method)
				}
			})
		}
	}
}

// transfer is one HTTP transfer of the SDK's, by the method it sends.
type transfer struct {
	method string
	run    func(ctx context.Context) error
}

// uploadAndDownload are an upload of a small picture to conv (its PUT)
// and a download, as c makes them.
func uploadAndDownload(c *client.Client, conv int64) []transfer {
	return []transfer{
		{http.MethodPut, func(ctx context.Context) error {
			_, err := c.Upload(ctx, conv, "p.png", bytes.NewReader(mediatest.PNG(64, 64)))
			return err
		}},
		{http.MethodGet, func(ctx context.Context) error {
			_, err := c.Download(ctx, "00000000-0000-0000-0000-000000000000", io.Discard)
			return err
		}},
	}
}
