package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/chatd/chatd/client"
)

func runSend(ctx context.Context, a *app, args []string) error {
	fs := newFlags("send", "send --user N (--conversation ID | --peer N) --body TEXT [--reply-to SEQ]",
		"Send a message as --user, over MQTT like any client, and print the seq chatd\nassigned once it is committed. --peer sends to the direct conversation with\nthat user (opening it if needed). --body - reads the body from stdin.\n--reply-to quotes a message of the same conversation (members see its first\n100 characters above the reply).",
		`chatctl send --user 1 --peer 2 --body "hello"`,
		`chatctl send --user 1 --conversation 3 --body "hi team"`,
		`chatctl send --user 2 --conversation 3 --reply-to 42 --body "agreed"`)
	cf := addChatFlags(fs)
	conv := fs.Int64("conversation", 0, "conversation id")
	peer := fs.Int64("peer", 0, "send to the direct conversation with this user instead")
	body := fs.String("body", "", "message text (- reads stdin)")
	replyTo := fs.Int64("reply-to", 0, "seq of the message (same conversation) this one replies to")
	id := fs.String("client-msg-id", "", "UUID making the send idempotent (default: a new one); reuse it to retry safely")
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if (*conv == 0) == (*peer == 0) {
		return usagef("%s: give exactly one of --conversation ID and --peer USER", fs.Name())
	}
	if *body == "" {
		return usagef(`%s: --body is required, e.g. --body "hello" (or --body - for stdin)`, fs.Name())
	}
	if *replyTo < 0 {
		return usagef("%s: --reply-to must be the positive seq of a message, e.g. --reply-to 42", fs.Name())
	}
	if err := checkClientMsgID(fs, id); err != nil {
		return err
	}
	text, err := readBody(a, *body)
	if err != nil {
		return err
	}
	c, closeFn, err := cf.connect(ctx, a, fs)
	if err != nil {
		return err
	}
	defer closeFn()
	if *peer != 0 {
		d, _, err := c.OpenDirect(ctx, *peer)
		if err != nil {
			return explainChat(err, fs, *cf.user, 0)
		}
		*conv = d.ID
	}
	seq, err := c.SendMessage(ctx, *conv, text, client.SendOptions{ReplyTo: *replyTo, ClientMsgID: *id})
	if err != nil {
		if *replyTo != 0 && errors.Is(err, client.ErrInvalid) {
			return hint(err, "%v: --reply-to %d must be the seq of a message of conversation %d; list them with `chatctl history --user %d --conversation %d`",
				err, *replyTo, *conv, *cf.user, *conv)
		}
		return explainChat(err, fs, *cf.user, *conv)
	}
	if *cf.json {
		out := map[string]any{"conversationId": *conv, "seq": seq, "clientMsgId": *id}
		if *replyTo != 0 {
			out["replyTo"] = *replyTo
		}
		return printJSON(a.stdout, out)
	}
	fmt.Fprintf(a.stdout, "[conv %d #%d] user %d%s: %s\n", *conv, seq, *cf.user, replyNote(*replyTo), text)
	return nil
}

// replyNote is " (reply to #S)" for a reply, else "".
func replyNote(seq int64) string {
	if seq == 0 {
		return ""
	}
	return fmt.Sprintf(" (reply to #%d)", seq)
}
