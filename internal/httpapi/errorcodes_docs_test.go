package httpapi_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// domainCodes reads the domain error codes from errors.go with the HTTP
// status its comment gives each ("...: 409 / MQTT 0x99").
func domainCodes(t *testing.T) map[chat.Code]int {
	t.Helper()
	src, err := os.ReadFile("../../errors.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[chat.Code]int{}
	for _, m := range regexp.MustCompile(`(?m)^\s*Code\w+\s+Code\s*=\s*"(\w+)"\s*//.*?: (\d{3}) / MQTT`).FindAllStringSubmatch(string(src), -1) {
		codes[chat.Code(m[1])], _ = strconv.Atoi(m[2])
	}
	if len(codes) < 10 {
		t.Fatalf("errors.go: read %d codes with their status (%v): has the comments' form changed?", len(codes), codes)
	}
	return codes
}

// TestEveryErrorCodeIsDocumentedWithTheStatusItIsAnswered holds errors.go's
// comments, the error table of docs/http.md and the list in openapi.yaml's
// description to the status ErrorStatus answers each domain code with.
func TestEveryErrorCodeIsDocumentedWithTheStatusItIsAnswered(t *testing.T) {
	md, err := os.ReadFile("../../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	table := map[chat.Code]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| (\\d{3}) \\|").FindAllStringSubmatch(string(md), -1) {
		table[chat.Code(m[1])], _ = strconv.Atoi(m[2])
	}
	spec, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	list, _, _ := strings.Cut(string(spec), "Clients branch on the code")
	_, list, ok := strings.Cut(list, "Codes:")
	if !ok {
		t.Fatal(`openapi.yaml's description lists no "Codes:" before "Clients branch on the code"`)
	}
	for code, commented := range domainCodes(t) {
		status := httpapi.ErrorStatus(code)
		if commented != status {
			t.Errorf("errors.go says %s is %d, ErrorStatus answers %d", code, commented, status)
		}
		if got, ok := table[code]; !ok || got != status {
			t.Errorf("http.md's error table: %s is %d (listed: %v), answered %d", code, got, ok, status)
		}
		m := regexp.MustCompile(`\b` + string(code) + `\b[^()]*\((\d{3})`).FindStringSubmatch(list)
		if m == nil || m[1] != strconv.Itoa(status) {
			t.Errorf("openapi.yaml's codes: %s is %v, answered %d", code, m, status)
		}
	}
}
