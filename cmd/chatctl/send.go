package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
)

func runSend(ctx context.Context, a *app, args []string) error {
	fs := newFlags("send", "send --user N (--conversation ID | --peer N) --body TEXT",
		"Send a message as --user, over MQTT like any client, and print the seq chatd\nassigned once it is committed. --peer sends to the direct conversation with\nthat user (opening it if needed). --body - reads the body from stdin.",
		`chatctl send --user 1 --peer 2 --body "hello"`,
		`chatctl send --user 1 --conversation 3 --body "hi team"`)
	cf := addChatFlags(fs)
	conv := fs.Int64("conversation", 0, "conversation id")
	peer := fs.Int64("peer", 0, "send to the direct conversation with this user instead")
	body := fs.String("body", "", "message text (- reads stdin)")
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
	if *id == "" {
		*id = uuid.NewString()
	} else if _, err := uuid.Parse(*id); err != nil {
		return usagef("%s: --client-msg-id %q is not a UUID", fs.Name(), *id)
	}
	text := *body
	if text == "-" {
		b, err := io.ReadAll(a.stdin())
		if err != nil {
			return fmt.Errorf("read body from stdin: %w", err)
		}
		text = strings.TrimSuffix(string(b), "\n")
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
	seq, err := c.SendWithID(ctx, *conv, *id, text)
	if err != nil {
		return explainChat(err, fs, *cf.user, *conv)
	}
	if *cf.json {
		return printJSON(a.stdout, map[string]any{"conversationId": *conv, "seq": seq, "clientMsgId": *id})
	}
	fmt.Fprintf(a.stdout, "[conv %d #%d] user %d: %s\n", *conv, seq, *cf.user, text)
	return nil
}
