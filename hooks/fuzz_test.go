package hooks

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Further parsers of untrusted MQTT input besides those in topics_test.go:
// read receipts, RPC response topics and topic ids. Seeds are in
// testdata/fuzz; .ci/fuzz.sh runs each target for a bounded time.

func FuzzDecodeReadPayload(f *testing.F) {
	for _, s := range []string{`{"seq":1}`, `{"seq":-1}`, `{"seq":9223372036854775808}`, `{"seq":1.5}`, `{"seq":"1"}`, `{}`, ``,
		`{"seq":1,"x":2}`, `{"seq":1} {}`, "{\"seq\":1,\"\xff\":1}", `[` + strings.Repeat("[", 20000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p readPayload
		if err := decodeStrict(b, &p); err == nil {
			if !utf8.Valid(b) || !strings.Contains(string(b), "{") {
				t.Fatalf("accepted %q", b)
			}
		}
	})
}

func FuzzResponseTopicAllowed(f *testing.F) {
	for _, s := range []string{"chat/v1/user/7/rpc/x", "chat/v1/user/7/#", "chat/v1/user/7/+", "chat/v1/user/8/rpc", "chat/v1/user/7", "chat/v1/user/70/rpc", "chat/v1/user/7/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, topic string) {
		if ResponseTopicAllowed(7, topic) {
			if !strings.HasPrefix(topic, UserTree(7)) || strings.ContainsAny(topic, "+#") {
				t.Fatalf("response topic %q allowed outside user 7's tree or with a wildcard", topic)
			}
		}
	})
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1", "0", "01", "-1", "+1", "9223372036854775807", "9223372036854775808", " 1", "1e3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := ParseID(s); ok && (n <= 0 || strconv.FormatInt(n, 10) != s) {
			t.Fatalf("ParseID(%q) = %d: not a canonical positive id", s, n)
		}
	})
}
