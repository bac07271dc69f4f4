package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
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

// TestAFailingReadinessProbeIsLoggedOnceAStateNotEveryProbe: probes come
// every few seconds from each orchestrator and balancer; while the
// database was down each failing one logged a warning. The change to not
// ready is a warning, the way back an info line, and the probes between
// them say nothing above debug.
func TestAFailingReadinessProbeIsLoggedOnceAStateNotEveryProbe(t *testing.T) {
	var down atomic.Bool
	e := newEnvWith(t, envConfig{ready: func(context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}})
	down.Store(true)
	for range 10 {
		if r := e.do(0, "GET", "/readyz", nil); r.status != 503 {
			t.Fatalf("readyz with the database down: %d %s", r.status, r.body)
		}
	}
	down.Store(false)
	for range 3 {
		if r := e.do(0, "GET", "/readyz", nil); r.status != 200 {
			t.Fatalf("readyz with the database back: %d %s", r.status, r.body)
		}
	}
	var warns, infos int
	for _, line := range strings.Split(e.logs.String(), "\n") {
		switch {
		case strings.Contains(line, `"level":"WARN"`):
			warns++
		case strings.Contains(line, `"level":"INFO"`) && strings.Contains(line, "ready"):
			infos++
		}
	}
	if warns != 1 || infos != 1 {
		t.Fatalf("%d warnings and %d info lines for 10 failing probes and the way back, want 1 and 1:\n%s", warns, infos, e.logs.String())
	}
}
