package chat_test

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// A hit's snippet folds its whole body (chat.Snippet), every hit of a
// page: text with no Latin or Greek accent to fold (Cyrillic, CJK,
// Hangul) costs the fold, not a decomposition and composition of each of
// its characters. Counted in allocations, which that cost is made of
// (over five thousand for this body; the whole fold takes a few dozen).
func TestASnippetOfTextWithNoAccentToFoldDoesNotDecomposeEachCharacter(t *testing.T) {
	terms, err := chat.ParseSearchTerms("дела")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		strings.Repeat("Привет всем, как дела у вас сегодня? ", 100),
		strings.Repeat("今天的会议改到下午三点 ", 100),
		strings.Repeat("한국어 공부를 합니다 ", 100),
	} {
		if n := testing.AllocsPerRun(5, func() { chat.Snippet(body, terms) }); n > 100 {
			t.Errorf("a snippet of %d characters (%.10q...) allocates %.0f times, want at most 100", utf8.RuneCountInString(body), body, n)
		}
	}
	// What it keeps as it is still matches and is highlighted.
	snip, hl := chat.Snippet("Как дела? ДЕЛА!", terms)
	if rs := []rune(snip); len(hl) != 2 || string(rs[hl[0][0]:hl[0][1]]) != "дела" || string(rs[hl[1][0]:hl[1][1]]) != "ДЕЛА" {
		t.Errorf("snippet %q highlights %v, want both words", snip, hl)
	}
}

// A snippet's highlights are every match of every term in the body, in
// order: a body of many matches of several terms (a query of eight
// one-letter terms, a body of those letters) made a sort of them by
// insertion take time quadratic in the matches, 80 ms a hit for a 16 KiB
// body (the default limit), so seconds of CPU for a page of 50 hits. On a
// body of 64 KiB, a bound an n log n sort keeps by far (about 10 ms here).
func TestASnippetOfABodyOfManyMatchesTakesNoQuadraticTime(t *testing.T) {
	terms, err := chat.ParseSearchTerms("a b c d e f g h")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("h g f e d c b a ", 4096)
	start := time.Now()
	snip, hl := chat.Snippet(body, terms)
	if took := time.Since(start); took > time.Second {
		t.Errorf("the snippet of a body of %d matches took %v", 8*4096, took)
	}
	if len(hl) != 60 || hl[0] != [2]int{0, 1} || !strings.HasPrefix(snip, "h g f") {
		t.Errorf("snippet %.20q... highlights %d ranges from %v, want 60 from [0 1]", snip, len(hl), hl[0])
	}
}
