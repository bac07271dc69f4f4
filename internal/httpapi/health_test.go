package httpapi_test

import (
	"context"
	"errors"
	"testing"
)

// TestHealth: liveness needs nothing; readiness pings PostgreSQL and is 503
// when that fails. Neither needs a token.
func TestHealth(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		r := e.do(0, "GET", p, nil)
		if r.status != 200 || string(r.body) != "{\"status\":\"ok\"}\n" {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
		if r := e.do(0, "HEAD", p, nil); r.status != 200 {
			t.Errorf("HEAD %s: %d", p, r.status)
		}
	}

	// The real failure: the database is gone.
	e.pool.Close()
	r := e.do(0, "GET", "/readyz", nil)
	if r.status != 503 || r.errorCode() != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Errorf("readyz with the pool closed: %d %s %v", r.status, r.body, r.header)
	}
	if r := e.do(0, "GET", "/healthz", nil); r.status != 200 {
		t.Errorf("healthz must not depend on the database: %d", r.status)
	}

	// A ready func that fails, and one that hangs past the probe timeout.
	failing := newEnvWith(t, envConfig{ready: func(context.Context) error { return errors.New("connection refused by 10.1.2.3") }})
	r = failing.do(0, "GET", "/readyz", nil)
	if r.status != 503 || r.errorCode() != "unavailable" {
		t.Errorf("failing ready: %d %s", r.status, r.body)
	}
	if containsAny(string(r.body), "10.1.2.3", "refused") {
		t.Errorf("readyz leaks the cause: %s", r.body)
	}
	hanging := newEnvWith(t, envConfig{ready: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }})
	if r := hanging.do(0, "GET", "/readyz", nil); r.status != 503 {
		t.Errorf("hanging ready: %d %s", r.status, r.body)
	}
}
