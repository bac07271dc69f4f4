package httpapi_test

import (
	"net/http"
	"strings"
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

// TestMutingAConversationThatDoesNotExistIs404AsEveryConversationRouteAnswers:
// an unknown conversation is 404 not_found on every route that names
// one (docs/http.md, errors); the settings route alone answered 403
// not_member, with a message that named no conversation. A conversation
// that exists and the caller is not in stays 403 not_member, over HTTP
// and RPC alike.
func TestMutingAConversationThatDoesNotExistIs404AsEveryConversationRouteAnswers(t *testing.T) {
	e, _ := newPushEnv(t)
	g := e.group(1, 2)
	for _, c := range []struct {
		conv   int64
		status int
		code   string
	}{{999999, http.StatusNotFound, "not_found"}, {g, http.StatusForbidden, "not_member"}} {
		r := e.do(3, "PUT", pathf("/v1/conversations/%d/settings", c.conv), `{"muted":true}`)
		if r.status != c.status || r.errorCode() != c.code || !strings.Contains(string(r.body), pathf("conversation %d", c.conv)) {
			t.Errorf("PUT settings of conversation %d: %d %s, want %d %s naming it", c.conv, r.status, truncate(r.body), c.status, c.code)
		}
		rr := e.rpc(3, "conversation.settings", pathf(`{"conversationId":%d,"muted":true}`, c.conv))
		if rr.status != c.status || rr.code != c.code {
			t.Errorf("RPC settings of conversation %d: %s, want %d %s", c.conv, rr.raw, c.status, c.code)
		}
	}
}
