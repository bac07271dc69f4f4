package httpapi_test

import (
	"strings"
	"testing"
)

// TestNoAPIAnswerMayBeFramed: every answer of the API, JSON or an
// attachment's bytes, error or success, tells a browser that no page may
// frame it (X-Frame-Options DENY, and frame-ancestors 'none' in its
// Content-Security-Policy) and not to sniff its type, as OWASP's REST
// guidance asks: a page of another site framing an answer could dress it
// up for a click. No answer refused framing.
func TestNoAPIAnswerMayBeFramed(t *testing.T) {
	e, id, _ := rangeEnv(t)
	for _, c := range []struct {
		name string
		r    resp
	}{
		{"GET /v1/me", e.do(1, "GET", "/v1/me", nil)},
		{"GET /v1/me without a token", e.do(0, "GET", "/v1/me", nil)},
		{"an unknown route", e.do(1, "GET", "/v1/nothing-here", nil)},
		{"GET /healthz", e.do(0, "GET", "/healthz", nil)},
		{"an attachment", e.do(2, "GET", "/v1/attachments/"+id, nil)},
		{"an attachment's range past its end", e.do(2, "GET", "/v1/attachments/"+id, nil, withHeader("Range", "bytes=99999999-"))},
	} {
		h := c.r.header
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s (%d): X-Frame-Options %q, Content-Security-Policy %q, X-Content-Type-Options %q; want DENY, frame-ancestors 'none', nosniff",
				c.name, c.r.status, h.Get("X-Frame-Options"), h.Get("Content-Security-Policy"), h.Get("X-Content-Type-Options"))
		}
	}
}
