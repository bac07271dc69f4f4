package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestEditWithAnEmptyBodyClearsTheTextOfAPhoto: chatd lets an edit clear
// the text of a message with attachments; edit took --body "" for a
// missing --body and refused it before connecting. Given explicitly, an
// empty --body is sent, and chatd judges it: the photo's text is
// cleared, a text message's edit to nothing is refused. --body left out
// is still a usage error.
func TestEditWithAnEmptyBodyClearsTheTextOfAPhoto(t *testing.T) {
	_, env := startChatdForFiles(t)
	p := filepath.Join(t.TempDir(), "holiday.jpg")
	if err := os.WriteFile(p, mediatest.JPEG(40, 30), 0o600); err != nil {
		t.Fatal(err)
	}
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--file", p, "--body", "the view"))
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "words"))

	if got := strings.TrimSpace(mustOK(t, chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "1", "--body", "")).stdout); got != "[conv 1 #3] user 1 edited #1:" {
		t.Errorf("edit --body \"\" of a photo printed %q", got)
	}
	wantFail(t, chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "2", "--body", ""), 1, "body is empty")
	wantFail(t, chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "1"), 2, "--body is required")
}
