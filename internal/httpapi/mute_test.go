package httpapi_test

import (
	"net/http"
	"testing"
)

// TestAMuteUntilAfterTheYear9999IsRefusedNotStoredToBreakTheInbox:
// "9999-12-31T23:59:59-23:59" is valid RFC 3339 but is in the year 10000
// in UTC, which no JSON answer can carry (encoding/json refuses years
// past 9999). Stored, it made the settings answer and every later inbox
// of its user a 500; it is refused as 400 invalid over HTTP and RPC, and
// the settings and inbox stay readable. The last instant of 9999 is a
// mute to come like any other.
func TestAMuteUntilAfterTheYear9999IsRefusedNotStoredToBreakTheInbox(t *testing.T) {
	e, _ := newPushEnv(t)
	g := e.group(1, 2)
	set := pathf("/v1/conversations/%d/settings", g)
	for _, until := range []string{"9999-12-31T23:59:59-23:59", "9999-12-31T23:00:00-01:00"} {
		r := e.do(1, "PUT", set, `{"mutedUntil":"`+until+`"}`)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
			t.Errorf("PUT mutedUntil %s: %d %s, want 400 invalid", until, r.status, truncate(r.body))
		}
		rr := e.rpc(1, "conversation.settings", pathf(`{"conversationId":%d,"mutedUntil":%q}`, g, until))
		if rr.status != http.StatusBadRequest || rr.code != "invalid" {
			t.Errorf("RPC mutedUntil %s: %s, want 400 invalid", until, rr.raw)
		}
		if r := e.do(1, "GET", "/v1/inbox", nil); r.status != http.StatusOK {
			t.Fatalf("inbox after a mute until %s: %d %s", until, r.status, truncate(r.body))
		}
	}
	var s struct {
		Muted      bool
		MutedUntil string
	}
	e.must(http.StatusOK, 1, "PUT", set, `{"mutedUntil":"9999-12-31T23:59:59.999999Z"}`, &s)
	if !s.Muted || s.MutedUntil != "9999-12-31T23:59:59.999999Z" {
		t.Errorf("mute until the end of 9999: %+v", s)
	}
	e.must(http.StatusOK, 1, "GET", "/v1/inbox", nil, nil)
}
