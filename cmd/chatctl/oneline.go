package main

import (
	"strconv"
	"strings"
	"unicode"
)

// oneLine is text a user wrote (a message body, a search snippet) as
// chatctl prints it: on the line of its event, with the characters that
// would end that line, drive the terminal (escape sequences, a bell) or
// reorder what it shows (the line separators, bidirectional controls)
// written as Go escapes (\n, \x1b, \u202e). chatd refuses only NUL in a
// body, and the line is often another user's.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, rearranges) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if rearranges(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rearranges reports the characters oneLine escapes.
func rearranges(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
}
