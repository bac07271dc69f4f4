package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// The parsers of untrusted HTTP (and RPC) input: request bodies of every
// operation, query strings, path ids and the Content-Type check. Seeds are
// in testdata/fuzz; .ci/fuzz.sh runs each target for a bounded time.

// bodyTargets decodes into each operation's parameters.
var bodyTargets = []func() any{
	func() any { return &sendParams{} },
	func() any { return &createParams{} },
	func() any { return &directParams{} },
	func() any { return &conversationParams{} },
	func() any { return &memberParams{} },
	func() any { return &historyParams{} },
	func() any { return &seqParams{} },
	func() any { return &inboxParams{} },
}

func FuzzDecodeRequestBody(f *testing.F) {
	for _, s := range []string{
		`{"clientMsgId":"6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11","body":"hi"}`,
		`{"type":"group","title":"t","members":[2,3]}`,
		`{"seq":9223372036854775807}`, `{"seq":-1}`, `{"seq":1e400}`, `{}`, ``, `null`, `[]`,
		`{"body":"\ud800"}`, "{\"body\":\"\xff\"}", `{"a":1}`, `{"seq":1} {"seq":2}`,
		`{"members":[` + strings.Repeat("[", 100) + `]}`, `{"limit":1,"cursor":"MTo"}`,
	} {
		for i := range bodyTargets {
			f.Add([]byte(s), uint8(i), i%2 == 0)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, allowEmpty bool) {
		v := bodyTargets[int(which)%len(bodyTargets)]()
		err := decodeStrict(data, v, allowEmpty)
		if err != nil {
			if chat.ErrorCode(err) != chat.CodeInvalid {
				t.Fatalf("rejection %v is not 'invalid'", err)
			}
			return
		}
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) == 0 {
			if !allowEmpty {
				t.Fatalf("accepted an empty body")
			}
			return
		}
		if trimmed[0] != '{' || !json.Valid(trimmed) {
			t.Fatalf("accepted %q, which is not one JSON object", data)
		}
		// What was accepted survives a round trip through its own type.
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		w := bodyTargets[int(which)%len(bodyTargets)]()
		if err := decodeStrict(b, w, false); err != nil {
			t.Fatalf("re-encoded %s rejected: %v", b, err)
		}
	})
}

func FuzzQueryAndPathIDs(f *testing.F) {
	for _, s := range [][2]string{
		{"afterSeq=5&limit=10", "7"}, {"beforeSeq=-1", "-1"}, {"limit=%zz", "0"}, {"limit=1&limit=2", "01"},
		{"afterSeq=9223372036854775808", "9223372036854775807"}, {"cursor=MTo&limit=", "+5"}, {";", "1e3"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rawQuery, id string) {
		r := httptest.NewRequest("GET", "/v1/inbox", nil)
		r.URL.RawQuery = rawQuery
		known := []string{"beforeSeq", "afterSeq", "limit", "cursor"}
		q, err := parseQuery(r, known...)
		if err == nil {
			for k, vs := range q.values {
				if !strings.Contains(strings.Join(known, ","), k) || len(vs) != 1 {
					t.Fatalf("accepted parameter %q = %q", k, vs)
				}
			}
			for _, k := range known[:3] {
				n, err := q.int64(k)
				if err == nil && (n < 0 || (n > 0 && strconv.FormatInt(n, 10) != q.str(k)) || (n == 0 && q.str(k) != "" && q.str(k) != "0")) {
					t.Fatalf("%s=%q read as %d", k, q.str(k), n)
				}
			}
		}
		// An accepted id is exactly the canonical decimal of n, as in MQTT
		// topics: no sign, no leading zeros ("007" is refused).
		n, err := parseID("id", id)
		if err == nil && (n <= 0 || strconv.FormatInt(n, 10) != id) {
			t.Fatalf("id %q accepted as %d", id, n)
		}
	})
}

func FuzzReadBody(f *testing.F) {
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/merge-patch+json",
		"text/plain", "application/json; charset=latin1", "multipart/form-data; boundary=x", ";;", "application/json; charset"} {
		f.Add(ct, []byte(`{"seq":1}`))
	}
	a := &API{svc: chat.NewService(nil, chat.DefaultLimits()), log: logger(nil)}
	limit := a.maxRequestBytes()
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest("POST", "/v1/conversations/1/read", bytes.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		b, err := a.readBody(httptest.NewRecorder(), r)
		if err != nil {
			return
		}
		if int64(len(b)) > limit || !bytes.Equal(b, body) {
			t.Fatalf("read %d bytes of %d (limit %d)", len(b), len(body), limit)
		}
		if ct := strings.ToLower(contentType); contentType != "" && !strings.Contains(ct, "json") {
			t.Fatalf("accepted Content-Type %q", contentType)
		}
	})
}
