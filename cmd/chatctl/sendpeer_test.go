package main

import (
	"context"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestASendWhoseBodyIsRefusedOpensNoConversationWithThePeer: send --peer
// opened the direct conversation before the body reached chatd, so a body
// chatd refuses (over the limit, a NUL) left a conversation the user never
// wrote in, listed in both users' inboxes. The body is checked first now,
// by the rules chatd applies with the settings chatctl shares with it: a
// usage error naming --body, nothing created.
func TestASendWhoseBodyIsRefusedOpensNoConversationWithThePeer(t *testing.T) {
	srv, env := startChatdEnv(t)
	for _, body := range []string{strings.Repeat("x", chat.DefaultMaxBodyBytes+1), "a\x00b"} {
		r := chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", body)
		if r.code == 0 || !strings.Contains(r.stderr, "--body") {
			t.Errorf("send --peer of a %d-byte body chatd refuses: exit %d, want a refusal naming --body\nstderr: %.300s", len(body), r.code, r.stderr)
		}
	}
	var convs int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM conversation`).Scan(&convs); err != nil {
		t.Fatal(err)
	}
	if convs != 0 {
		t.Errorf("after the refused sends: %d conversations, want none", convs)
	}
}
