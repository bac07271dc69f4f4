package main

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
)

// hostile is a message body a sender may send (chatd refuses only NUL):
// a newline and a forged line, an escape sequence that retitles the
// terminal and clears it, and a right-to-left override.
const hostile = "hi\n[conv 1 #9] user 3: fake\x1b]0;owned\x07\x1b[2J\u202eevil"

// shownSafely: s holds the other user's text on one line, with no byte
// that drives a terminal or reorders what it shows.
func shownSafely(t *testing.T, what, s string, lines int) {
	t.Helper()
	if strings.ContainsAny(s, "\x1b\x07\u202e") || strings.Count(s, "\n") != lines || !strings.Contains(s, "fake") {
		t.Errorf("%s printed %q: want the body's text on %d line(s), its control characters escaped", what, s, lines)
	}
}

// TestChatctlPrintsOthersTextWithoutTheirControlCharacters: bodies (and
// abouts) are other users' text, printed by history, inbox, search, tail
// (and profile --of); written
// as they came, a sender forged lines of tail's one-line-per-event
// output and sent escape sequences to the terminal of whoever ran it.
func TestChatctlPrintsOthersTextWithoutTheirControlCharacters(t *testing.T) {
	for _, ev := range []client.Event{
		{Type: client.EventMessageNew, ConversationID: 1, Seq: 1, SenderID: 1, Body: hostile},
		{Type: client.EventMessageEdited, ConversationID: 1, Seq: 2, TargetSeq: 1, SenderID: 1, Body: hostile},
	} {
		var b strings.Builder
		if err := printEvent(&b, ev, false); err != nil {
			t.Fatal(err)
		}
		shownSafely(t, "tail's "+ev.Type, b.String(), 1)
	}

	_, env := startChatdEnv(t)
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", hostile))
	shownSafely(t, "history", mustOK(t, chatctl(t, env, "history", "--user", "2", "--conversation", "1")).stdout, 1)
	shownSafely(t, "inbox", mustOK(t, chatctl(t, env, "inbox", "--user", "2")).stdout, 2)
	shownSafely(t, "search", mustOK(t, chatctl(t, env, "search", "--user", "2", "--query", "fake")).stdout, 1)

	// An about may hold line breaks; a carriage return wrote over the
	// line it was printed on.
	mustOK(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann", "--about", "climber\rfake"))
	if out := mustOK(t, chatctl(t, env, "profile", "--user", "2", "--of", "1")).stdout; strings.Contains(out, "\r") || !strings.Contains(out, "fake") {
		t.Errorf("profile --of printed %q: want the about's carriage return escaped", out)
	}
}
