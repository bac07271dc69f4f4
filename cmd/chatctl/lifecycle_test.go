package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// TestReplyEditReactRecallShowInHistoryAndTail walks a message's life with
// the commands a person would type: a reply quotes it, its sender fixes a
// typo, the other member reacts, the reply is taken back. tail shows each
// change as it happens and history shows every message as it is now.
func TestReplyEditReactRecallShowInHistoryAndTail(t *testing.T) {
	_, env := startChatdEnv(t)

	tailOut, tailErr, _ := startChatctl(t, env, "tail", "--user", "2")
	waitForText(t, tailErr, "following the events of user 2", 15*time.Second)

	line := func(r result) string { return strings.TrimSpace(mustOK(t, r).stdout) }
	if got := line(chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "helo")); got != "[conv 1 #1] user 1: helo" {
		t.Fatalf("send printed %q", got)
	}
	// As it was sent: the conversation is new to user 2's session, which
	// may read its first entries from PostgreSQL, and read after the edit
	// below they would be as they are then.
	waitForText(t, tailOut, "[conv 1 #1] user 1: helo\n", 15*time.Second)
	if got := line(chatctl(t, env, "send", "--user", "2", "--conversation", "1", "--reply-to", "1", "--body", "hi!")); got != "[conv 1 #2] user 2 (reply to #1): hi!" {
		t.Errorf("send --reply-to printed %q", got)
	}
	editID := uuid.NewString()
	if got := line(chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "1", "--body", "hello", "--client-msg-id", editID)); got != "[conv 1 #3] user 1 edited #1: hello" {
		t.Errorf("edit printed %q", got)
	}
	// A retry with the same id is the same edit, not a new entry.
	if got := line(chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "1", "--body", "hello", "--client-msg-id", editID)); got != "[conv 1 #3] user 1 edited #1: hello" {
		t.Errorf("edit retried with its --client-msg-id printed %q, want the first edit's seq #3", got)
	}
	if got := line(chatctl(t, env, "react", "--user", "2", "--conversation", "1", "--seq", "1", "--emoji", "👍")); got != "[conv 1 #4] user 2 reacted 👍 to #1" {
		t.Errorf("react printed %q", got)
	}
	if got := line(chatctl(t, env, "react", "--user", "2", "--conversation", "1", "--seq", "1", "--emoji", "👍")); got != "[conv 1] user 2 had already reacted 👍 to #1; nothing changed" {
		t.Errorf("react again printed %q", got)
	}

	r := mustOK(t, chatctl(t, env, "history", "--user", "2", "--conversation", "1"))
	if want := "[conv 1 #1] user 1: hello (edited) [👍 1]\n[conv 1 #2] user 2 (reply to #1): hi!\n"; r.stdout != want {
		t.Errorf("history printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	page := decode[struct{ Messages []client.Message }](t, mustOK(t, chatctl(t, env, "history", "--user", "1", "--conversation", "1", "--json")))
	var kinds []string
	for _, m := range page.Messages {
		kinds = append(kinds, m.Kind)
	}
	if strings.Join(kinds, " ") != "message message edit reaction" {
		t.Errorf("history --json kinds %v, want every entry: message message edit reaction", kinds)
	}
	if len(page.Messages) > 1 {
		if ref := page.Messages[1].ReplyTo; ref == nil || ref.Seq != 1 || ref.Snippet != "hello" {
			t.Errorf("history --json: the reply's replyTo is %+v, want seq 1 with the edited snippet", ref)
		}
	}

	// The rules, refused with what to do next.
	wantFail(t, chatctl(t, env, "edit", "--user", "2", "--conversation", "1", "--seq", "1", "--body", "mine now"), 1,
		"only the sender can edit", "user 2 may not edit #1", "chatctl history --user 2 --conversation 1")
	wantFail(t, chatctl(t, env, "recall", "--user", "1", "--conversation", "1", "--seq", "2"), 1,
		"user 1 may not recall #2")
	wantFail(t, chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "99", "--body", "x"), 1,
		"conversation 1 has no message #99 to edit")
	wantFail(t, chatctl(t, env, "react", "--user", "3", "--conversation", "1", "--seq", "1", "--emoji", "👍"), 1,
		"user 3 is not a member of conversation 1")

	if got := line(chatctl(t, env, "recall", "--user", "2", "--conversation", "1", "--seq", "2")); got != "[conv 1 #5] user 2 recalled #2 for everyone" {
		t.Errorf("recall printed %q", got)
	}
	if got := line(chatctl(t, env, "recall", "--user", "2", "--conversation", "1", "--seq", "2")); got != "[conv 1 #5] user 2 recalled #2 for everyone" {
		t.Errorf("a second recall printed %q, want the first recall's seq #5", got)
	}
	wantFail(t, chatctl(t, env, "react", "--user", "1", "--conversation", "1", "--seq", "2", "--emoji", "👍"), 1,
		"message #2 was recalled for everyone")
	if got := line(chatctl(t, env, "react", "--user", "2", "--conversation", "1", "--seq", "1", "--emoji", "👍", "--off")); got != "[conv 1 #6] user 2 removed 👍 from #1" {
		t.Errorf("react --off printed %q", got)
	}
	if got := line(chatctl(t, env, "react", "--user", "2", "--conversation", "1", "--seq", "1", "--emoji", "👍", "--off")); got != "[conv 1] user 2 had no 👍 on #1; nothing changed" {
		t.Errorf("react --off again printed %q", got)
	}

	r = mustOK(t, chatctl(t, env, "history", "--user", "1", "--conversation", "1"))
	// A recalled message shows nothing of where it came from: no quote.
	if want := "[conv 1 #1] user 1: hello (edited)\n[conv 1 #2] user 2: (recalled)\n"; r.stdout != want {
		t.Errorf("history after the recall printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	for _, want := range []string{
		"[conv 1 #1] user 1: helo\n",
		"[conv 1 #2] user 2 (reply to #1): hi!\n",
		"[conv 1 #3] user 1 edited #1: hello\n",
		"[conv 1 #4] user 2 reacted 👍 to #1 (👍 1)\n",
		"[conv 1 #5] user 2 recalled #2\n",
		"[conv 1 #6] user 2 removed 👍 from #1 (👍 0)\n",
	} {
		waitForText(t, tailOut, want, 15*time.Second)
	}
}

// TestForwardCopiesTheMessageIntoAnotherConversation forwards a message
// from a direct chat to a third user: the copy names its origin, and only
// a member of the origin may forward from it.
func TestForwardCopiesTheMessageIntoAnotherConversation(t *testing.T) {
	_, env := startChatdEnv(t)

	mustOK(t, chatctl(t, env, "send", "--user", "2", "--peer", "1", "--body", "the wifi password is hunter2"))
	r := mustOK(t, chatctl(t, env, "forward", "--user", "1", "--peer", "3", "--from-conversation", "1", "--seq", "1"))
	if got := strings.TrimSpace(r.stdout); got != "[conv 2 #1] user 1 (forwarded from conv 1 #1): the wifi password is hunter2" {
		t.Errorf("forward printed %q", got)
	}
	r = mustOK(t, chatctl(t, env, "history", "--user", "3", "--conversation", "2"))
	if want := "[conv 2 #1] user 1 (forwarded from conv 1 #1): the wifi password is hunter2\n"; r.stdout != want {
		t.Errorf("the recipient's history printed %q, want %q", r.stdout, want)
	}
	// Into the same conversation, as JSON.
	out := decode[struct {
		ConversationID int64
		Seq            int64
		Body           string
		ForwardedFrom  struct{ ConversationID, Seq int64 }
	}](t, mustOK(t, chatctl(t, env, "forward", "--user", "2", "--conversation", "1", "--from-conversation", "1", "--seq", "1", "--json")))
	if out.ConversationID != 1 || out.Seq != 2 || out.Body != "the wifi password is hunter2" || out.ForwardedFrom.ConversationID != 1 || out.ForwardedFrom.Seq != 1 {
		t.Errorf("forward --json printed %+v", out)
	}

	wantFail(t, chatctl(t, env, "forward", "--user", "3", "--conversation", "2", "--from-conversation", "1", "--seq", "1"), 1,
		"user 3 must be a member of conversation 1 to forward from it", "chatctl inbox --user 3")
	mustOK(t, chatctl(t, env, "recall", "--user", "2", "--conversation", "1", "--seq", "1"))
	wantFail(t, chatctl(t, env, "forward", "--user", "1", "--conversation", "2", "--from-conversation", "1", "--seq", "1"), 1,
		"conversation 1 has no message #1 that can be forwarded", "chatctl history --user 1 --conversation 1")
	// A reply must quote a message of its own conversation.
	wantFail(t, chatctl(t, env, "send", "--user", "1", "--conversation", "2", "--reply-to", "9", "--body", "what?"), 1,
		"--reply-to 9 must be the seq of a message of conversation 2")
}

func TestLifecycleCommandsRefuseIncompleteUsageBeforeConnecting(t *testing.T) {
	// No chatd anywhere: usage errors come first.
	env := map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:1"}
	wantFail(t, chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--body", "x"), 2, "--seq is required")
	wantFail(t, chatctl(t, env, "edit", "--user", "1", "--conversation", "1", "--seq", "1"), 2, "--body is required")
	wantFail(t, chatctl(t, env, "recall", "--user", "1", "--seq", "1"), 2, "--conversation is required")
	wantFail(t, chatctl(t, env, "react", "--user", "1", "--conversation", "1", "--seq", "1"), 2, "--emoji is required, e.g. --emoji 👍")
	wantFail(t, chatctl(t, env, "react", "--user", "1", "--conversation", "1", "--seq", "1", "--emoji", "👍", "--client-msg-id", "nope"), 2,
		`--client-msg-id "nope" is not a UUID`)
	wantFail(t, chatctl(t, env, "forward", "--user", "1", "--conversation", "2", "--seq", "1"), 2, "--from-conversation is required")
	wantFail(t, chatctl(t, env, "forward", "--user", "1", "--from-conversation", "1", "--seq", "1"), 2,
		"exactly one of --conversation ID and --peer USER")
	wantFail(t, chatctl(t, env, "send", "--user", "1", "--conversation", "1", "--reply-to", "-1", "--body", "x"), 2,
		"--reply-to must be the positive seq of a message")
}

// A send or an edit retried with its --client-msg-id after the message
// was recalled printed it as sent (chatd answers the duplicate's seq); it
// says the message is gone for everyone now, and exits 0 (it did commit:
// sending it once more would store a new message).
func TestARetriedSendOrEditOfARecalledMessageSaysItIsGone(t *testing.T) {
	_, env := startChatdEnv(t)
	line := func(r result) string { return strings.TrimSpace(mustOK(t, r).stdout) }
	sendID, editID := uuid.NewString(), uuid.NewString()
	send := []string{"send", "--user", "1", "--peer", "2", "--body", "oops", "--client-msg-id", sendID}
	edit := []string{"edit", "--user", "1", "--conversation", "1", "--seq", "1", "--body", "oops!", "--client-msg-id", editID}
	if got := line(chatctl(t, env, send...)); got != "[conv 1 #1] user 1: oops" {
		t.Fatalf("send printed %q", got)
	}
	if got := line(chatctl(t, env, edit...)); got != "[conv 1 #2] user 1 edited #1: oops!" {
		t.Fatalf("edit printed %q", got)
	}
	mustOK(t, chatctl(t, env, "recall", "--user", "1", "--conversation", "1", "--seq", "1"))

	if got := line(chatctl(t, env, send...)); got != "[conv 1 #1] user 1: recalled since; it is gone for everyone" {
		t.Errorf("send retried after the recall printed %q", got)
	}
	if got := line(chatctl(t, env, edit...)); got != "[conv 1 #2] user 1 edited #1: recalled since; it is gone for everyone" {
		t.Errorf("edit retried after the recall printed %q", got)
	}
	j := decode[struct {
		Seq      int64
		Recalled bool
	}](t, mustOK(t, chatctl(t, env, append(send, "--json")...)))
	if j.Seq != 1 || !j.Recalled {
		t.Errorf("send --json retried after the recall: %+v, want seq 1 recalled", j)
	}
}
