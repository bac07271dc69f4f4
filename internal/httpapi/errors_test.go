package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// faultyStore answers Inbox with err, or panics when err is nil.
type faultyStore struct {
	chat.Store
	err error
}

func (s faultyStore) Inbox(context.Context, int64, int, string) (chat.InboxPage, error) {
	if s.err == nil {
		panic("store exploded")
	}
	return chat.InboxPage{}, s.err
}

// TestErrorMapping: every chat.Code maps to its documented status over HTTP
// and RPC; 429 and 503 carry Retry-After; untyped errors and panics are a
// 500 "internal" whose cause is logged and never shown.
func TestErrorMapping(t *testing.T) {
	secret := "pq: password authentication failed for user chatd at 10.9.8.7"
	cases := []struct {
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{chat.Errorf(chat.CodeInvalid, "bad"), 400, "invalid", false},
		{chat.Errorf(chat.CodeTooLarge, "big"), 413, "too_large", false},
		{chat.ErrNotMember, 403, "not_member", false},
		{chat.ErrForbidden, 403, "forbidden", false},
		{chat.ErrNotFound, 404, "not_found", false},
		{chat.ErrConflict, 409, "conflict", false},
		{chat.ErrMemberCap, 409, "member_cap", false},
		{chat.Errorf(chat.CodeTooManyReactions, "full"), 409, "too_many_reactions", false},
		{chat.ErrRateLimited, 429, "rate_limited", true},
		{chat.Unavailable("inbox", errors.New(secret)), 503, "unavailable", true},
		{errors.New(secret), 500, "internal", false},
		{nil, 500, "internal", false}, // panic
	}
	for _, c := range cases {
		e := newEnvWith(t, envConfig{wrap: func(s chat.Store) chat.Store { return faultyStore{Store: s, err: c.err} }})
		r := e.do(1, "GET", "/v1/inbox", nil)
		if r.status != c.status || r.errorCode() != c.code {
			t.Errorf("%v: HTTP %d %s, want %d %s", c.err, r.status, r.body, c.status, c.code)
		}
		if got := r.header.Get("Retry-After") != ""; got != c.retryAfter {
			t.Errorf("%v: Retry-After %q", c.err, r.header.Get("Retry-After"))
		}
		rr := e.rpc(1, "inbox", "{}")
		if rr.status != c.status || rr.code != c.code {
			t.Errorf("%v: RPC %s, want %d %s", c.err, rr.raw, c.status, c.code)
		}
		for _, body := range []string{string(r.body), string(rr.raw)} {
			if containsAny(body, "10.9.8.7", "password", "exploded") {
				t.Errorf("%v: cause leaked to the client: %s", c.err, body)
			}
		}
		if c.status == 500 {
			if !strings.Contains(string(r.body), `"message":"internal error"`) {
				t.Errorf("500 body %s", r.body)
			}
			logs := e.logs.String()
			if !containsAny(logs, "10.9.8.7", "exploded") || !strings.Contains(logs, `"level":"ERROR"`) {
				t.Errorf("%v: the cause was not logged at error level:\n%s", c.err, logs)
			}
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Every 429 and 503 says when to try again, in the Retry-After header and
// in the body's error.retryAfter, which RPC replies (no headers) carry
// too: the refusing bucket's own delay when there is one, else a second.
// A limit that is no rate (member_cap, 409) says nothing of the kind.
func TestEvery429And503SaysWhenToRetryInItsHeaderAndItsBody(t *testing.T) {
	bucket := &chat.Error{Code: chat.CodeRateLimited, Message: "over",
		RateLimit: &chat.RateLimitInfo{Kind: chat.RateAPI, Limit: 5, RetryAfter: 2500 * time.Millisecond, Reset: 4 * time.Second}}
	cases := []struct {
		err   error
		retry string // "": none
	}{
		{bucket, "3"},
		{chat.ErrRateLimited, "1"},
		{chat.Unavailable("inbox", errors.New("connection refused")), "1"},
		{chat.ErrMemberCap, ""},
	}
	for _, c := range cases {
		e := newEnvWith(t, envConfig{wrap: func(s chat.Store) chat.Store { return faultyStore{Store: s, err: c.err} }})
		r := e.do(1, "GET", "/v1/inbox", nil)
		rr := e.rpc(1, "inbox", "{}")
		var hb, rb struct {
			Error struct {
				RetryAfter *int64 `json:"retryAfter"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &hb); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(rr.raw, &rb); err != nil {
			t.Fatal(err)
		}
		got := func(p *int64) string {
			if p == nil {
				return ""
			}
			return strconv.FormatInt(*p, 10)
		}
		if r.header.Get("Retry-After") != c.retry || got(hb.Error.RetryAfter) != c.retry || got(rb.Error.RetryAfter) != c.retry {
			t.Errorf("%v: HTTP %d Retry-After %q body %s, RPC %s; want retry after %q in all three",
				c.err, r.status, r.header.Get("Retry-After"), r.body, rr.raw, c.retry)
		}
	}
}
