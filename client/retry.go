package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// maxToldRetry bounds the wait a refusal can ask for (a CONNACK's or an
// RPC reply's retryAfter, an HTTP answer's Retry-After): chatd asks for
// at most a minute, but an upload's daily quota or a misbehaving server
// or proxy must not stop the client for hours.
const maxToldRetry = 5 * time.Minute

// toldWait is the wait before repeating a request that was refused with
// told (0: the refusal did not say): the caller's own backoff d, but at
// least told, capped at maxToldRetry, plus up to a second of jitter, so
// that the clients told the same second do not all come back in the same
// instant.
func toldWait(d, told time.Duration) time.Duration {
	if told <= 0 {
		return d
	}
	return max(d, min(told, maxToldRetry)+rand.N(time.Second))
}

// toldBy is the retry delay err says, if it is a refusal that says one.
func toldBy(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// retryDelay is the wait after failed attempt n whose error was err:
// backoff, stretched to what a refusal of chatd (or of a proxy or object
// store in front of it) said.
func (c *Client) retryDelay(n int, err error) time.Duration {
	return toldWait(c.backoff(n), toldBy(err))
}

// retryAfterHeader reads an HTTP answer's Retry-After, whole seconds or an
// HTTP date, for a 429 or 503 only (a redirect's means something else); 0
// when it is absent, unreadable or past.
func retryAfterHeader(resp *http.Response, now time.Time) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	v := resp.Header.Get("Retry-After")
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// askAgainLater waits out err when it is a refusal that says when to ask
// again (rate_limited, or unavailable with a retry delay: busy request
// workers, a database outage) and reports whether to ask again; not when
// the delay is one the caller gets at once (toldTooLong). A wait ends
// with ctx.
func (c *Client) askAgainLater(ctx context.Context, n int, err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.RetryAfter <= 0 ||
		!(errors.Is(e, ErrRateLimited) || errors.Is(e, ErrUnavailable)) {
		return false
	}
	if toldTooLong(ctx, err) {
		return false
	}
	d := c.retryDelay(n, err)
	c.cfg.Logger.Info("chatd asked to retry later; waiting", "op", e.Op, "wait", d)
	return sleepCtx(ctx, d)
}

// toldTooLong reports whether err is a refusal whose retry delay is not
// waited out by an operation that retries by itself (Upload, Download):
// one beyond maxToldRetry (an upload's daily quota, until midnight), or
// one that would outlast ctx. The caller gets the refusal, with its
// RetryAfter, at once, and decides.
func toldTooLong(ctx context.Context, err error) bool {
	told := toldBy(err)
	if told <= 0 {
		return false
	}
	dl, ok := ctx.Deadline()
	return told > maxToldRetry || ok && time.Until(dl) < told
}
