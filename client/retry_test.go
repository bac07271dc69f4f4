package client

import (
	"net/http"
	"testing"
	"time"
)

// TestARetryAfterIsReadAsSecondsOrAnHTTPDate: a 429's or 503's
// Retry-After is whole seconds or an HTTP date (a proxy's); a past date,
// garbage, or the header of another status is no wait.
func TestARetryAfterIsReadAsSecondsOrAnHTTPDate(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		status int
		value  string
		want   time.Duration
	}{
		{http.StatusServiceUnavailable, "7", 7 * time.Second},
		{http.StatusTooManyRequests, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{http.StatusTooManyRequests, now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{http.StatusServiceUnavailable, "soon", 0},
		{http.StatusServiceUnavailable, "", 0},
		{http.StatusFound, "7", 0},
	} {
		resp := &http.Response{StatusCode: c.status, Header: http.Header{"Retry-After": {c.value}}}
		if got := retryAfterHeader(resp, now); got != c.want {
			t.Errorf("%d with Retry-After %q: %v, want %v", c.status, c.value, got, c.want)
		}
	}
	// A wait told is at least what was told, capped, with under a
	// second of jitter; nothing told leaves the backoff as it is.
	if d := toldWait(time.Second, 0); d != time.Second {
		t.Errorf("nothing told: %v, want the backoff", d)
	}
	if d := toldWait(100*time.Millisecond, 3*time.Second); d < 3*time.Second || d >= 4*time.Second {
		t.Errorf("told 3s: %v", d)
	}
	if d := toldWait(0, 24*time.Hour); d < maxToldRetry || d >= maxToldRetry+time.Second {
		t.Errorf("told a day: %v, want about maxToldRetry", d)
	}
}
