package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

// TestUnmutingClearsMutedUntilWhateverTheRequestSays pins what
// docs/http.md says of a settings PUT: mutedUntil alone mutes until then;
// "muted":false unmutes and clears mutedUntil, also when the request
// carries one (a client that sends back the settings it read with muted
// switched off), even one that has passed, which only a mute refuses.
func TestUnmutingClearsMutedUntilWhateverTheRequestSays(t *testing.T) {
	e, _ := newPushEnv(t)
	g := e.group(1, 2)
	set := pathf("/v1/conversations/%d/settings", g)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	type settings struct {
		Muted      bool
		MutedUntil *string
		Mentions   bool
	}
	check := func(what, body string, muted bool, until *string) {
		t.Helper()
		var s settings
		e.must(http.StatusOK, 1, "PUT", set, body, &s)
		if s.Muted != muted || (s.MutedUntil == nil) != (until == nil) || (until != nil && *s.MutedUntil != *until) || !s.Mentions {
			t.Errorf("%s: %+v (mutedUntil %v), want muted %v until %v", what, s, deref(s.MutedUntil), muted, deref(until))
		}
	}
	check("mutedUntil alone", `{"mutedUntil":"`+future+`"}`, true, &future)
	check("muted false with a mutedUntil", `{"muted":false,"mutedUntil":"`+future+`","mentions":true}`, false, nil)
	check("muted true until unmuted", `{"muted":true,"mutedUntil":null}`, true, nil)
	check("muted false with a mutedUntil passed", `{"muted":false,"mutedUntil":"`+past+`"}`, false, nil)
	if r := e.do(1, "PUT", set, `{"mutedUntil":"`+past+`"}`); r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
		t.Errorf("a mute until a time passed: %d %s, want 400 invalid", r.status, truncate(r.body))
	}
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
