package httpapi_test

import (
	"strings"
	"testing"
)

// A node that is shutting down answers every readiness probe 503, as it
// should, but each answer used to log a warning ("operation unavailable
// ... shutting down"): every probe of every balancer through a drain, on
// every planned stop. The stop is chatd's own "shutting down" line; the
// probes it answers say nothing above debug.
func TestReadinessProbesDuringADrainAreNotWarnings(t *testing.T) {
	e := newEnv(t)
	e.api.Drain()
	for range 10 {
		if r := e.do(0, "GET", "/readyz", nil); r.status != 503 || r.errorCode() != "unavailable" || r.header.Get("Retry-After") == "" {
			t.Fatalf("readyz while draining: %d %s %v", r.status, r.body, r.header)
		}
	}
	if n := strings.Count(e.logs.String(), `"level":"WARN"`); n != 0 {
		t.Fatalf("%d warnings for 10 probes of a draining node, want none:\n%s", n, e.logs.String())
	}
}
