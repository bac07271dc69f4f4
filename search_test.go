package chat_test

import (
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
)

// A short term matches at a word's start, and a word starts where CJK
// characters and others meet (the search finds "ok" in "用ok了"): the
// snippet highlights what the search matched there too.
func TestSnippetHighlightsAShortTermRightAfterCJKCharacters(t *testing.T) {
	for _, c := range []struct {
		body, q string
		want    [][2]int
	}{
		{"用ok了", "ok", [][2]int{{1, 3}}},
		{"用PostgreSQL", "po", [][2]int{{1, 3}}},
		{"Ok", "ok", [][2]int{{0, 2}}},
		{"took", "ok", [][2]int{}},
	} {
		terms, err := chat.ParseSearchTerms(c.q)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := chat.Snippet(c.body, terms); !slices.Equal(got, c.want) {
			t.Errorf("%q in %q: highlights %v, want %v", c.q, c.body, got, c.want)
		}
	}
}
