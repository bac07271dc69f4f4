package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var envNameRE = regexp.MustCompile(`CHAT_[A-Z0-9_]*[A-Z0-9]`)

// settingsTable returns the CHAT_ variables named in the first column of
// the table of doc whose header row starts with header.
func settingsTable(t *testing.T, doc, header string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", doc))
	if err != nil {
		t.Fatal(err)
	}
	names, in := map[string]bool{}, false
	for _, l := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && !strings.HasPrefix(l, "|"):
			return names
		case in:
			for _, n := range envNameRE.FindAllString(strings.Split(l, "|")[1], -1) {
				names[n] = true
			}
		}
	}
	if !in {
		t.Fatalf("%s has no table starting %q", doc, header)
	}
	return names
}

// TestEverySettingIsInTheDocsTablesAndEveryDocumentedOneIsASetting: an
// operator looks a variable up in README's table or in operations.md's
// list of settings; one missing there is one they never learn of, and one
// listed there that chatd does not read (misspelt, removed) is set in
// vain (Load only warns of an unknown variable).
func TestEverySettingIsInTheDocsTablesAndEveryDocumentedOneIsASetting(t *testing.T) {
	code := slices.Clone(ProcessEnv)
	for _, k := range keys {
		code = append(code, k.env)
	}
	for _, doc := range []struct{ path, header string }{
		{"README.md", "| env | default | meaning |"},
		{"docs/operations.md", "| variable | default | accepted values |"},
	} {
		table := settingsTable(t, doc.path, doc.header)
		var missing, unknown []string
		for _, n := range code {
			if !table[n] {
				missing = append(missing, n)
			}
		}
		for n := range table {
			if !slices.Contains(code, n) {
				unknown = append(unknown, n)
			}
		}
		slices.Sort(unknown)
		if len(missing) > 0 {
			t.Errorf("%s's settings table lacks %s", doc.path, strings.Join(missing, " "))
		}
		if len(unknown) > 0 {
			t.Errorf("%s's settings table names %s, which chatd does not read", doc.path, strings.Join(unknown, " "))
		}
	}
}
