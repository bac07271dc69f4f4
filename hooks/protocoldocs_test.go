package hooks

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestEveryErrorCodeIsDocumentedWithThePUBACKItIsAnswered holds errors.go's
// comments ("...: 409 / MQTT 0x99") and the table of docs/protocol.md's
// "Send outcomes" to the PUBACK reason code ReasonCode gives each domain
// code: a code the table lists is in the row of its reason code, and every
// code but unavailable and internal (the row of database trouble) is
// listed.
func TestEveryErrorCodeIsDocumentedWithThePUBACKItIsAnswered(t *testing.T) {
	src, err := os.ReadFile("../errors.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\s*Code\w+\s+Code\s*=\s*"(\w+)"\s*//.*?: \d{3} / MQTT (0x[0-9a-f]{2})`).FindAllStringSubmatch(string(src), -1)
	if len(codes) < 10 {
		t.Fatalf("errors.go: read %d codes with their reason code: has the comments' form changed?", len(codes))
	}
	md, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(md), "\n## Send outcomes\n")
	section, _, _ = strings.Cut(section, "\n## ")
	row := map[string]string{} // reason code of the row listing each code
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, " | ")
		rc := regexp.MustCompile(`\*\*(0x[0-9A-F]{2})\*\*`).FindStringSubmatch(line)
		if len(cells) < 3 || rc == nil {
			continue
		}
		for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[len(cells)-1], -1) {
			row[c[1]] = strings.ToLower(rc[1])
		}
	}
	// A code no publish is answered (a group full comes in an RPC reply)
	// is said so in the section, in no row.
	notPublish := map[string]bool{}
	for _, c := range regexp.MustCompile("No publish is refused `([a-z_]+)`").FindAllStringSubmatch(section, -1) {
		notPublish[c[1]] = true
		if listed, ok := row[c[1]]; ok {
			t.Errorf("protocol.md's Send outcomes says no publish is refused %s, yet lists it in the row of PUBACK %s", c[1], listed)
		}
	}
	for _, m := range codes {
		code, commented := m[1], m[2]
		got := fmt.Sprintf("0x%02x", ReasonCode(chat.Errorf(chat.Code(code), "refused")))
		if commented != got {
			t.Errorf("errors.go says %s is MQTT %s, ReasonCode answers %s", code, commented, got)
		}
		listed, ok := row[code]
		if !ok && !notPublish[code] && code != string(chat.CodeUnavailable) && code != string(chat.CodeInternal) {
			t.Errorf("protocol.md's Send outcomes lists %s in no row", code)
		}
		if ok && listed != got {
			t.Errorf("protocol.md's Send outcomes lists %s in the row of PUBACK %s, ReasonCode answers %s", code, listed, got)
		}
	}
}

// TestTheDocumentedTopicAndClientIDLimitsAreTheOnesHeld holds every
// length limit protocol.md, http.md and openapi.yaml give topics, filters,
// RPC response topics and client ids to MaxTopicLength and
// MaxClientIDLength: a response topic was once held to 512 bytes while
// the docs said 256.
func TestTheDocumentedTopicAndClientIDLimitsAreTheOnesHeld(t *testing.T) {
	for _, c := range []struct {
		file, pattern string
		want          int
	}{
		{"protocol.md", `Topics and filters are at most (\d+) bytes`, MaxTopicLength},
		{"protocol.md", `no wildcards, at most (\d+) bytes\) and Correlation Data`, MaxTopicLength},
		{"protocol.md", `or one longer than (\d+) bytes gets PUBACK 0x87`, MaxTopicLength},
		{"http.md", "Response Topic under its own user tree \\(`chat/v1/user/\\{id\\}/...`, at\\s+most (\\d+) bytes", MaxTopicLength},
		{"openapi.yaml", `other than its events topic, at most (\d+) bytes`, MaxTopicLength},
		{"protocol.md", `\| client id \|[^|]*At most (\d+) bytes: a longer one gets CONNACK`, MaxClientIDLength},
	} {
		doc, err := os.ReadFile("../docs/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(c.pattern).FindSubmatch(doc)
		if m == nil {
			t.Errorf("%s no longer says %q: say the limit again, and here where", c.file, c.pattern)
			continue
		}
		if string(m[1]) != strconv.Itoa(c.want) {
			t.Errorf("%s says %s bytes (%q), the server holds %d", c.file, m[1], c.pattern, c.want)
		}
	}
}
