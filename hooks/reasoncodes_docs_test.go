package hooks

import (
	"fmt"
	"os"
	"regexp"
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
	for _, m := range codes {
		code, commented := m[1], m[2]
		got := fmt.Sprintf("0x%02x", ReasonCode(chat.Errorf(chat.Code(code), "refused")))
		if commented != got {
			t.Errorf("errors.go says %s is MQTT %s, ReasonCode answers %s", code, commented, got)
		}
		listed, ok := row[code]
		if !ok && code != string(chat.CodeUnavailable) && code != string(chat.CodeInternal) {
			t.Errorf("protocol.md's Send outcomes lists %s in no row", code)
		}
		if ok && listed != got {
			t.Errorf("protocol.md's Send outcomes lists %s in the row of PUBACK %s, ReasonCode answers %s", code, listed, got)
		}
	}
}
