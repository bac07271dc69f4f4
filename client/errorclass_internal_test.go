package client

import (
	"os"
	"regexp"
	"testing"
)

// TestEveryCodeChatdAnswersHasAClass: a refusal with a code chatd may
// answer matches a sentinel (errors.Is), so an application can tell it
// from a bug; errors.go lists the domain codes, with their HTTP status.
func TestEveryCodeChatdAnswersHasAClass(t *testing.T) {
	src, err := os.ReadFile("../errors.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\s*Code\w+\s+Code\s*=\s*"(\w+)"`).FindAllStringSubmatch(string(src), -1)
	if len(codes) < 10 {
		t.Fatalf("errors.go: read %d codes: has its form changed?", len(codes))
	}
	for _, m := range codes {
		if codeClass[m[1]] == nil {
			t.Errorf("code %s has no class in codeClass: errors.Is matches it with no sentinel", m[1])
		}
	}
}
