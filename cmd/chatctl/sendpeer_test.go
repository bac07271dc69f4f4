package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/server"
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
	if convs := conversations(t, srv); convs != 0 {
		t.Errorf("after the refused sends: %d conversations, want none", convs)
	}
}

// TestAForwardChatdRefusesOpensNoConversationWithThePeer: forward --peer
// opened the direct conversation before chatd judged the forward, so a
// forward from a conversation the user is not in, or of a recalled
// message, left an empty conversation with the peer behind. The message
// is read first now (as the user may read it); the refusals are as before.
func TestAForwardChatdRefusesOpensNoConversationWithThePeer(t *testing.T) {
	srv, env := startChatdEnv(t)
	mustOK(t, chatctl(t, env, "send", "--user", "2", "--peer", "4", "--body", "between us"))
	mustOK(t, chatctl(t, env, "send", "--user", "2", "--peer", "4", "--body", "gone soon"))
	mustOK(t, chatctl(t, env, "recall", "--user", "2", "--conversation", "1", "--seq", "2"))

	wantFail(t, chatctl(t, env, "forward", "--user", "1", "--peer", "3", "--from-conversation", "1", "--seq", "1"), 1,
		"user 1 must be a member of conversation 1 to forward from it")
	wantFail(t, chatctl(t, env, "forward", "--user", "2", "--peer", "3", "--from-conversation", "1", "--seq", "2"), 1,
		"conversation 1 has no message #2 that can be forwarded")
	wantFail(t, chatctl(t, env, "forward", "--user", "2", "--peer", "3", "--from-conversation", "1", "--seq", "9"), 1,
		"conversation 1 has no message #9 that can be forwarded")
	if convs := conversations(t, srv); convs != 1 {
		t.Errorf("after the refused forwards: %d conversations, want only the one forwarded from", convs)
	}
	r := mustOK(t, chatctl(t, env, "forward", "--user", "2", "--peer", "3", "--from-conversation", "1", "--seq", "1"))
	if !strings.Contains(r.stdout, "(forwarded from conv 1 #1): between us") {
		t.Errorf("forward --peer printed %q", r.stdout)
	}
}

// TestASendWithAReplyOrAFileChatdRefusesOpensNoConversationWithThePeer:
// send --peer opened the direct conversation before chatd judged the
// --reply-to or the --file, so a reply in a conversation that did not
// exist yet (it has no message to quote), an empty file or one over
// max_upload_bytes left an empty conversation with the peer behind. The
// reply looks for the conversation first, and the files are checked
// against chatd's limits first; nothing is created.
func TestASendWithAReplyOrAFileChatdRefusesOpensNoConversationWithThePeer(t *testing.T) {
	srv, env := startChatdForFiles(t)
	dir := t.TempDir()
	empty, big := filepath.Join(dir, "empty.txt"), filepath.Join(dir, "big.bin")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(big)
	if err == nil {
		err = errors.Join(f.Truncate(chat.DefaultMaxUploadBytes+1), f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--reply-to", "1", "--body", "re"}, {"--file", empty}, {"--file", big}} {
		r := chatctl(t, env, append([]string{"send", "--user", "1", "--peer", "2"}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("send --peer %q: exit %d, want a refusal naming %s\nstderr: %.300s", args, r.code, args[0], r.stderr)
		}
	}
	if convs := conversations(t, srv); convs != 0 {
		t.Errorf("after the refused sends: %d conversations, want none", convs)
	}
	// Once the conversation exists, --peer replies in it.
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "hi"))
	if r := mustOK(t, chatctl(t, env, "send", "--user", "2", "--peer", "1", "--reply-to", "1", "--body", "hello")); !strings.Contains(r.stdout, "(reply to #1): hello") {
		t.Errorf("send --peer --reply-to printed %q", r.stdout)
	}
}

// conversations counts the conversations srv holds.
func conversations(t *testing.T, srv *server.Server) (n int) {
	t.Helper()
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM conversation`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
