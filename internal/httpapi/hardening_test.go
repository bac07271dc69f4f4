package httpapi_test

import (
	"strings"
	"testing"
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
