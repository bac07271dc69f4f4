package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// TestTheSpecListsTheIdempotencyKeyOnTheRoutesThatHonourIt: the routes
// that honour an Idempotency-Key (a repeat with it answers the first and
// does nothing more) are the operations docs/openapi.yaml gives the
// header, and no others; every route a repeat of which could double an
// effect is one of them, or refuses the header.
func TestTheSpecListsTheIdempotencyKeyOnTheRoutesThatHonourIt(t *testing.T) {
	ops := loadSpec(t).ops(t)
	for _, r := range httpapi.Routes() {
		op := ops[r.Method+" "+r.Path]
		listed := false
		for _, p := range op.Parameters {
			if p.In == "header" && p.Name == "Idempotency-Key" {
				listed = true
			}
		}
		if honoured := r.Key == httpapi.KeyHonoured; listed != honoured {
			t.Errorf("%s %s: the spec lists Idempotency-Key %v, the route honours it %v", r.Method, r.Path, listed, honoured)
		}
		if r.Method == http.MethodGet && r.Key != httpapi.KeyNotNeeded {
			t.Errorf("GET %s: a read needs no key", r.Path)
		}
	}
}

// TestAnIdempotencyKeyIsHonouredOnASendAndAnEdit: a send's and an edit's
// key is the body's clientMsgId, and the Idempotency-Key header, which
// was ignored there, is that key under its HTTP name: alone it makes the
// send idempotent (a repeat is 200 with the first seq), and with a
// clientMsgId that is another key the request is refused, naming the
// header, and stores nothing: a client that sends the header with a new
// clientMsgId on each retry believed its retries safe, and each made a
// new message.
func TestAnIdempotencyKeyIsHonouredOnASendAndAnEdit(t *testing.T) {
	e := newEnv(t)
	g := e.group(owner, member)
	msgs := pathf("/v1/conversations/%d/messages", g)
	key := newID()
	// must is e.must with the header.
	must := func(want int, method, path string, body, out any, key string) {
		t.Helper()
		r := e.do(owner, method, path, body, withHeader("Idempotency-Key", key))
		if r.status != want {
			t.Fatalf("%s %s with Idempotency-Key %s: %d %s, want %d", method, path, key, r.status, truncate(r.body), want)
		}
		if out != nil {
			r.decode(t, out)
		}
	}
	var first, again httpapi.SendReply
	must(http.StatusCreated, "POST", msgs, map[string]any{"body": "keyed"}, &first, key)
	must(http.StatusOK, "POST", msgs, map[string]any{"body": "keyed"}, &again, strings.ToUpper(key))
	if again.Seq != first.Seq || first.ClientMsgID != key {
		t.Errorf("a send repeated with its Idempotency-Key: seq %d then %d, clientMsgId %q; want the first seq and the key", first.Seq, again.Seq, first.ClientMsgID)
	}
	// The same key in both: one key.
	must(http.StatusOK, "POST", msgs, map[string]any{"clientMsgId": key, "body": "keyed"}, nil, key)
	// Another key in the body: refused, nothing stored.
	r := e.do(owner, "POST", msgs, map[string]any{"clientMsgId": newID(), "body": "keyed"}, withHeader("Idempotency-Key", key))
	if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("a send whose header and clientMsgId differ: %d %s, want 400 invalid naming Idempotency-Key", r.status, truncate(r.body))
	}
	var h httpapi.HistoryReply
	e.must(http.StatusOK, owner, "GET", msgs, nil, &h)
	if n := len(h.Messages); n != 1 {
		t.Errorf("%d messages, want 1: a refused or repeated send stored one", n)
	}

	edit := pathf("/v1/conversations/%d/messages/%d", g, first.Seq)
	ek := newID()
	var e1, e2 httpapi.ChangeReply
	must(http.StatusOK, "PATCH", edit, map[string]any{"body": "edited"}, &e1, ek)
	must(http.StatusOK, "PATCH", edit, map[string]any{"body": "edited"}, &e2, ek)
	if e1.Seq != e2.Seq || !e2.Duplicate || e1.ClientMsgID != ek {
		t.Errorf("an edit repeated with its Idempotency-Key: %+v then %+v, want the first entry, duplicate", e1, e2)
	}
	r = e.do(owner, "PATCH", edit, map[string]any{"clientMsgId": newID(), "body": "edited again"}, withHeader("Idempotency-Key", ek))
	if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("an edit whose header and clientMsgId differ: %d %s, want 400 invalid naming Idempotency-Key", r.status, truncate(r.body))
	}
}

// TestATokenRevocationRefusesAnIdempotencyKey: a revocation repeated
// revokes the tokens issued since, which no key can prevent: one sent with
// an Idempotency-Key, whose client believes a retry safe, is 400 invalid
// naming the header and revokes nothing. Without the header it revokes.
func TestATokenRevocationRefusesAnIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	auth := withHeader("Authorization", "Bearer "+e.token(owner))
	r := e.do(0, "POST", "/v1/me/tokens/revoke", nil, auth, withHeader("Idempotency-Key", newID()))
	if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("revoke with an Idempotency-Key: %d %s, want 400 invalid naming the header", r.status, truncate(r.body))
	}
	if r := e.do(0, "GET", "/v1/me", nil, auth); r.status != http.StatusOK {
		t.Fatalf("the token after the refused revocation: %d %s, want 200: it was revoked", r.status, truncate(r.body))
	}
	if r := e.do(0, "POST", "/v1/me/tokens/revoke", nil, auth); r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s, want 200", r.status, truncate(r.body))
	}
	// A route a repeat of which changes nothing takes the header and
	// needs none.
	g := e.group(member, 3)
	m := e.sendMsg(3, g, newID(), "x")
	if r := e.do(member, "POST", pathf("/v1/conversations/%d/read", g), map[string]int64{"seq": m.Seq}, withHeader("Idempotency-Key", newID())); r.status != http.StatusOK {
		t.Errorf("a read receipt with an Idempotency-Key: %d %s, want 200", r.status, truncate(r.body))
	}
}

// TestAnIdempotencyKeyHeaderGivenTwiceIsNotIgnored: a request may carry
// the header more than once (a client library's default and the caller's
// own, a proxy adding one), and net/http's Header.Get reads the first
// line alone. An empty first line then hid the key: a token revocation
// carrying a key revoked (its client believed a retry safe), and a send
// whose key came second, with a new clientMsgId on each retry, sent a new
// message each time. A key given on more than one line is 400 invalid,
// naming the header, where a route reads it (a revocation, a send), and
// nothing is done.
func TestAnIdempotencyKeyHeaderGivenTwiceIsNotIgnored(t *testing.T) {
	e := newEnv(t)
	key := newID()
	twice := func(first, second string) reqOpt {
		return func(r *http.Request) {
			r.Header.Add("Idempotency-Key", first)
			r.Header.Add("Idempotency-Key", second)
		}
	}
	g := e.group(owner, member)
	msgs := pathf("/v1/conversations/%d/messages", g)
	for _, lines := range [][2]string{{"", key}, {key, newID()}} {
		for range 2 { // a retry, with a new clientMsgId as its client makes them
			r := e.do(owner, "POST", msgs, map[string]any{"clientMsgId": newID(), "body": "keyed"}, twice(lines[0], lines[1]))
			if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "Idempotency-Key") {
				t.Errorf("a send with Idempotency-Key lines %q: %d %s, want 400 invalid naming the header", lines, r.status, truncate(r.body))
			}
		}
	}
	var h httpapi.HistoryReply
	e.must(http.StatusOK, owner, "GET", msgs, nil, &h)
	if n := len(h.Messages); n != 0 {
		t.Errorf("%d messages, want none: a send whose key was given twice stored one", n)
	}
	// One line, as before.
	if r := e.do(owner, "POST", msgs, map[string]any{"body": "keyed"}, withHeader("Idempotency-Key", key)); r.status != http.StatusCreated {
		t.Errorf("a send with one Idempotency-Key: %d %s, want 201", r.status, truncate(r.body))
	}

	auth := withHeader("Authorization", "Bearer "+e.token(owner))
	r := e.do(0, "POST", "/v1/me/tokens/revoke", nil, auth, twice("", key))
	if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("revoke with an empty Idempotency-Key line and a key: %d %s, want 400 invalid naming the header", r.status, truncate(r.body))
	}
	if r := e.do(0, "GET", "/v1/me", nil, auth); r.status != http.StatusOK {
		t.Fatalf("the token after the refused revocation: %d %s, want 200: it was revoked", r.status, truncate(r.body))
	}
	// An empty header alone is no key, as before.
	if r := e.do(0, "POST", "/v1/me/tokens/revoke", nil, auth, withHeader("Idempotency-Key", "")); r.status != http.StatusOK {
		t.Errorf("revoke with an empty Idempotency-Key: %d %s, want 200 (empty is absent)", r.status, truncate(r.body))
	}
}
