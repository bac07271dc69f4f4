package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestAProxysPlainAnswerIsTypedByItsStatus: a proxy or load balancer in
// front of chatd answers an upload's PUT or a download's GET itself, with
// an HTML or text body, not chatd's JSON error. The error is typed by the
// HTTP status as chatd's own would be: 413 is too large (ErrInvalid,
// final: the same bytes are refused again), 401 is the token
// (ErrUnauthorized), 429 a rate limit with its Retry-After, and so on;
// not "internal" (ErrUnavailable), which an upload sends again as if
// chatd were briefly unable.
func TestAProxysPlainAnswerIsTypedByItsStatus(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	var status atomic.Int64
	rec := newHTTPRecorder(t, "http://"+srv.HTTPAddr(), func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		if r.Method != http.MethodPut && r.Method != http.MethodGet {
			return false
		}
		status := int(status.Load())
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "3600") // beyond what Upload and Download sit out
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html><body><h1>" + http.StatusText(status) + "</h1>nginx</body></html>\n"))
		return true
	})
	alice := connectHTTP(t, srv, 1, rec.URL)

	for _, want := range []struct {
		status int
		code   string
		class  error
	}{
		{http.StatusRequestEntityTooLarge, "too_large", client.ErrInvalid},
		{http.StatusUnauthorized, "unauthorized", client.ErrUnauthorized},
		{http.StatusForbidden, "forbidden", client.ErrForbidden},
		{http.StatusNotFound, "not_found", client.ErrNotFound},
		{http.StatusBadRequest, "invalid", client.ErrInvalid},
		{http.StatusUnsupportedMediaType, "unsupported", client.ErrInvalid},
		{http.StatusTooManyRequests, "rate_limited", client.ErrRateLimited},
	} {
		status.Store(int64(want.status))
		for _, c := range uploadAndDownload(alice, g.ID) {
			before := len(rec.of(c.method))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := c.run(ctx)
			cancel()
			var e *client.Error
			if !errors.As(err, &e) || e.Code != want.code || e.Status != want.status || !errors.Is(err, want.class) {
				t.Errorf("%s answered %d by a proxy: %v (%#v), want code %s matching %v", c.method, want.status, err, e, want.code, want.class)
				continue
			}
			if want.status == http.StatusTooManyRequests && e.RetryAfter != time.Hour {
				t.Errorf("%s answered 429 with Retry-After 3600: RetryAfter %v", c.method, e.RetryAfter)
			}
			if n := len(rec.of(c.method)) - before; n != 1 {
				t.Errorf("%s answered %d by a proxy was sent %d times, want once", c.method, want.status, n)
			}
		}
	}
}
