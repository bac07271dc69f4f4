package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestABadTimeInABodyIsRefusedSayingATimeIsRFC3339: a JSON body's time
// that does not parse (month 13, not a time, not a string) is 400 invalid
// saying times are RFC 3339, as the query's before and after are, not
// "malformed JSON" about a document that is well-formed: RPC search
// answers as GET /v1/search does, and a conversation's mutedUntil so too.
func TestABadTimeInABodyIsRefusedSayingATimeIsRFC3339(t *testing.T) {
	e, _ := newPushEnv(t)
	g := e.group(1, 2)
	for _, v := range []string{`"2026-13-01T00:00:00Z"`, `"tomorrow"`, `1767225600`} {
		rr := e.rpc(1, "search", `{"q":"hello","before":`+v+`}`)
		if rr.status != http.StatusBadRequest || rr.code != "invalid" || !strings.Contains(string(rr.raw), "RFC 3339") {
			t.Errorf("RPC search before %s: %s, want 400 invalid saying RFC 3339", v, rr.raw)
		}
		r := e.do(1, "PUT", pathf("/v1/conversations/%d/settings", g), `{"mutedUntil":`+v+`}`)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "RFC 3339") {
			t.Errorf("PUT mutedUntil %s: %d %s, want 400 invalid saying RFC 3339", v, r.status, truncate(r.body))
		}
	}
	if r := e.do(1, "GET", "/v1/search?q=hello&before=tomorrow", nil); !strings.Contains(string(r.body), "RFC 3339") {
		t.Errorf("GET search before=tomorrow: %d %s", r.status, truncate(r.body))
	}
}

// TestASearchWithTwoBadTimesIsAnsweredTheSameEveryTime: before and after
// were read in a map's order, so a query with both malformed named either
// at random; the same request now gets the same answer, naming before.
func TestASearchWithTwoBadTimesIsAnsweredTheSameEveryTime(t *testing.T) {
	e := newEnv(t)
	for range 30 {
		r := e.do(1, "GET", "/v1/search?q=x&before=yesterday&after=today", nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "before must be an RFC 3339 time") {
			t.Fatalf("GET /v1/search with two bad times: %d %s, want 400 naming before", r.status, truncate(r.body))
		}
	}
}
