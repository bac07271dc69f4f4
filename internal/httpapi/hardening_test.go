package httpapi_test

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// TestRequestHardening: oversized bodies, unknown fields, trailing data,
// bad ids and query parameters, wrong methods, unknown routes and wrong
// media types are refused with the documented status and code, as JSON.
func TestRequestHardening(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	msgs := pathf("/v1/conversations/%d/messages", g)
	read := pathf("/v1/conversations/%d/read", g)
	huge := `{"clientMsgId":"` + newID() + `","body":"` + strings.Repeat("a", 2<<20) + `"}`

	cases := []struct {
		name         string
		method, path string
		body         any
		opts         []reqOpt
		status       int
		code         string
	}{
		{"oversized message body", "POST", msgs, huge, nil, 413, "too_large"},
		{"oversized create body", "POST", "/v1/conversations", `{"type":"group","title":"` + strings.Repeat("t", 2<<20) + `"}`, nil, 413, "too_large"},
		{"unknown field", "POST", msgs, `{"clientMsgId":"` + newID() + `","body":"x","conversationId":1}`, nil, 400, "invalid"},
		{"unknown field on read", "POST", read, `{"seq":1,"sequence":1}`, nil, 400, "invalid"},
		{"unknown field on add", "POST", pathf("/v1/conversations/%d/members", g), `{"userId":3,"admin":true}`, nil, 400, "invalid"},
		{"trailing data", "POST", read, `{"seq":1} {"seq":2}`, nil, 400, "invalid"},
		{"trailing garbage", "POST", read, `{"seq":1}x`, nil, 400, "invalid"},
		{"malformed JSON", "POST", read, `{"seq":`, nil, 400, "invalid"},
		{"array body", "POST", read, `[{"seq":1}]`, nil, 400, "invalid"},
		{"null body", "POST", read, `null`, nil, 400, "invalid"},
		{"empty body", "POST", read, ``, nil, 400, "invalid"},
		{"string for a number", "POST", read, `{"seq":"1"}`, nil, 400, "invalid"},
		{"fraction for a number", "POST", read, `{"seq":1.5}`, nil, 400, "invalid"},
		{"number overflow", "POST", read, `{"seq":9223372036854775808}`, nil, 400, "invalid"},

		{"id not a number", "GET", "/v1/conversations/abc", nil, nil, 400, "invalid"},
		{"id zero", "GET", "/v1/conversations/0", nil, nil, 400, "invalid"},
		{"id negative", "GET", "/v1/conversations/-1", nil, nil, 400, "invalid"},
		{"id with plus", "GET", "/v1/conversations/+1", nil, nil, 400, "invalid"},
		{"id fraction", "GET", "/v1/conversations/1.0", nil, nil, 400, "invalid"},
		{"id overflow", "GET", "/v1/conversations/9223372036854775808", nil, nil, 400, "invalid"},
		{"id far overflow", "GET", "/v1/conversations/99999999999999999999999", nil, nil, 400, "invalid"},
		{"id with space", "GET", "/v1/conversations/%201", nil, nil, 400, "invalid"},
		{"seq not a number", "GET", pathf("/v1/conversations/%d/messages/x/seen", g), nil, nil, 400, "invalid"},
		{"peer id bad", "POST", "/v1/direct/me", nil, nil, 400, "invalid"},
		{"user id bad", "DELETE", pathf("/v1/conversations/%d/members/1e3", g), nil, nil, 400, "invalid"},
		{"max int64 id is valid, not found", "GET", "/v1/conversations/9223372036854775807", nil, nil, 404, "not_found"},
		// One id has one spelling over HTTP, RPC and MQTT (which refuses
		// chat/v1/conv/01/msg): leading zeros are not that spelling.
		{"id with a leading zero", "GET", pathf("/v1/conversations/0%d", g), nil, nil, 400, "invalid"},
		{"id with leading zeros", "GET", pathf("/v1/conversations/00%d/messages", g), nil, nil, 400, "invalid"},
		{"seq with a leading zero", "GET", pathf("/v1/conversations/%d/messages/01/seen", g), nil, nil, 400, "invalid"},
		{"peer id with a leading zero", "POST", "/v1/direct/02", nil, nil, 400, "invalid"},
		{"member id with a leading zero", "DELETE", pathf("/v1/conversations/%d/members/02", g), nil, nil, 400, "invalid"},
		{"query with a leading zero", "GET", msgs + "?afterSeq=01", nil, nil, 400, "invalid"},
		{"query zero padded", "GET", msgs + "?limit=00", nil, nil, 400, "invalid"},
		{"query zero is canonical", "GET", msgs + "?afterSeq=0", nil, nil, 200, ""},

		{"query negative", "GET", msgs + "?beforeSeq=-1", nil, nil, 400, "invalid"},
		{"query not a number", "GET", msgs + "?limit=ten", nil, nil, 400, "invalid"},
		{"query overflow", "GET", msgs + "?afterSeq=9223372036854775808", nil, nil, 400, "invalid"},
		{"query unknown", "GET", msgs + "?before=5", nil, nil, 400, "invalid"},
		{"query repeated", "GET", msgs + "?limit=1&limit=2", nil, nil, 400, "invalid"},
		{"query malformed", "GET", "/v1/inbox?limit=%zz", nil, nil, 400, "invalid"},
		{"query empty value is absent", "GET", msgs + "?limit=&beforeSeq=", nil, nil, 200, ""},
		{"inbox query unknown", "GET", "/v1/inbox?page=2", nil, nil, 400, "invalid"},

		{"wrong method on collection", "PUT", "/v1/conversations", `{}`, nil, 405, "method_not_allowed"},
		{"wrong method on item", "DELETE", pathf("/v1/conversations/%d", g), nil, nil, 405, "method_not_allowed"},
		{"wrong method on inbox", "POST", "/v1/inbox", `{}`, nil, 405, "method_not_allowed"},
		{"wrong method on direct", "GET", "/v1/direct/2", nil, nil, 405, "method_not_allowed"},
		{"wrong method on health", "POST", "/healthz", nil, nil, 405, "method_not_allowed"},
		{"unknown route", "GET", "/v1/nope", nil, nil, 404, "not_found"},
		{"trailing slash", "GET", "/v1/inbox/", nil, nil, 404, "not_found"},
		{"outside the API", "GET", "/", nil, nil, 404, "not_found"},

		{"text/plain", "POST", read, `{"seq":1}`, []reqOpt{withHeader("Content-Type", "text/plain")}, 415, "unsupported_media_type"},
		{"form", "POST", read, `seq=1`, []reqOpt{withHeader("Content-Type", "application/x-www-form-urlencoded")}, 415, "unsupported_media_type"},
		{"malformed media type", "POST", read, `{"seq":1}`, []reqOpt{withHeader("Content-Type", "json;;")}, 415, "unsupported_media_type"},
		{"latin-1 JSON", "POST", read, `{"seq":1}`, []reqOpt{withHeader("Content-Type", "application/json; charset=latin1")}, 415, "unsupported_media_type"},
		{"text/plain on a body-less POST", "POST", "/v1/direct/2", `{}`, []reqOpt{withHeader("Content-Type", "text/plain")}, 415, "unsupported_media_type"},
		{"missing content type is JSON", "POST", read, `{"seq":1}`, []reqOpt{noContentType()}, 200, ""},
		{"JSON with charset", "POST", read, `{"seq":1}`, []reqOpt{withHeader("Content-Type", "application/json; charset=UTF-8")}, 200, ""},
		{"a +json media type is JSON", "POST", read, `{"seq":1}`, []reqOpt{withHeader("Content-Type", "application/merge-patch+json")}, 200, ""},
	}
	for _, c := range cases {
		r := e.do(1, c.method, c.path, c.body, c.opts...)
		if r.status != c.status || r.errorCode() != c.code {
			t.Errorf("%s: %s %s: %d %q, want %d %q; body %s", c.name, c.method, c.path, r.status, r.errorCode(), c.status, c.code, truncate(r.body))
			continue
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
		if c.status == 405 && r.header.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", c.name)
		}
	}

	// A message body within the limit passes even when JSON escaping makes
	// the request several times larger.
	escaped := `{"clientMsgId":"` + newID() + `","body":"` + strings.Repeat(`\u0001`, 16<<10) + `"}`
	if r := e.do(1, "POST", msgs, escaped); r.status != 201 {
		t.Errorf("escaped body at the limit: %d %s", r.status, truncate(r.body))
	}
}

// TestEveryRouteRefusesUnknownQueryParameters: the query rule holds on
// every route, not only the lists: a parameter the route does not take, or
// one given twice, is 400 invalid before the route runs. Health probes
// answer whatever a prober adds.
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	fill := strings.NewReplacer("{id}", pathf("%d", g), "{peerId}", "2", "{userId}", "2", "{seq}", "1",
		"{emoji}", "x")
	for _, rt := range httpapi.Routes() {
		path := fill.Replace(rt.Path)
		if rt.Path == "/healthz" || rt.Path == "/readyz" {
			if r := e.do(0, rt.Method, path+"?x=1", nil); r.status != 200 {
				t.Errorf("%s %s?x=1: %d %s, want 200", rt.Method, rt.Path, r.status, truncate(r.body))
			}
			continue
		}
		if r := e.do(1, rt.Method, path+"?x=1", nil); r.status != 400 || r.errorCode() != "invalid" ||
			!strings.Contains(string(r.body), `unknown query parameter \"x\"`) {
			t.Errorf("%s %s?x=1: %d %s, want 400 invalid", rt.Method, rt.Path, r.status, truncate(r.body))
		}
	}
	for _, path := range []string{pathf("/v1/conversations/%d/members?limit=1&limit=1", g), "/v1/inbox?cursor=a&cursor=a"} {
		if r := e.do(1, "GET", path, nil); r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("GET %s: %d %s, want 400 invalid", path, r.status, truncate(r.body))
		}
	}
	if r := e.do(1, "GET", pathf("/v1/conversations/%d/members?limit=1", g), nil); r.status != 200 {
		t.Errorf("a known parameter: %d %s", r.status, truncate(r.body))
	}
}

// TestJSONFieldNamesAreExactAndGivenOnce: encoding/json alone would read
// {"SEQ":2} as seq and let the last of {"seq":1,"seq":2} win; bodies and
// RPC payloads are refused instead, nested objects included.
func TestJSONFieldNamesAreExactAndGivenOnce(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	m := e.sendMsg(1, g, newID(), "hi")
	read := pathf("/v1/conversations/%d/read", g)
	msgs := pathf("/v1/conversations/%d/messages", g)
	for _, c := range []struct{ name, path, body string }{
		{"upper-case field", read, `{"SEQ":1}`},
		{"mixed-case field", read, `{"Seq":1}`},
		{"repeated field", read, `{"seq":1,"seq":2}`},
		{"repeated field, one escaped", read, `{"seq":1,"s\u0065q":1}`},
		{"nested case", msgs, pathf(`{"clientMsgId":"%s","forward":{"ConversationId":%d,"seq":%d}}`, newID(), g, m.Seq)},
		{"nested repeat", msgs, pathf(`{"clientMsgId":"%s","forward":{"conversationId":%d,"seq":%d,"seq":%d}}`, newID(), g, m.Seq, m.Seq)},
	} {
		if r := e.do(2, "POST", c.path, c.body); r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("%s: %d %s, want 400 invalid", c.name, r.status, truncate(r.body))
		}
	}
	for _, payload := range []string{pathf(`{"conversationId":%d,"SEQ":1}`, g), pathf(`{"conversationId":%d,"seq":1,"seq":1}`, g)} {
		if r := e.rpc(2, "read", payload); r.status != 400 || r.code != "invalid" {
			t.Errorf("rpc read %s: %s, want 400 invalid", payload, r.raw)
		}
	}
	// The exact spelling, escaped or not, is accepted.
	e.must(200, 2, "POST", read, `{"s\u0065q":1}`, nil)
	e.must(201, 2, "POST", msgs, pathf(`{"clientMsgId":"%s","forward":{"conversationId":%d,"seq":%d}}`, newID(), g, m.Seq), nil)
}
