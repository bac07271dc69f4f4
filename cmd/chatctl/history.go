package main

import (
	"context"
	"fmt"

	"github.com/chatd/chatd/client"
)

func runHistory(ctx context.Context, a *app, args []string) error {
	fs := newFlags("history", "history --user N --conversation ID [--limit 20] [--before SEQ | --after SEQ] [--json]",
		"Print a conversation's messages, oldest first: the newest --limit by default,\nthose before --before, or those after --after.",
		"chatctl history --user 1 --conversation 3",
		"chatctl history --user 1 --conversation 3 --after 40 --limit 100")
	cf := addChatFlags(fs)
	conv := fs.Int64("conversation", 0, "conversation id")
	limit := fs.Int("limit", 20, "how many messages (at most 200)")
	before := fs.Int64("before", 0, "only messages before this seq")
	after := fs.Int64("after", 0, "only messages after this seq")
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if err := requireID(fs, "conversation", *conv, "the conversation id"); err != nil {
		return err
	}
	if *before != 0 && *after != 0 {
		return usagef("%s: give --before or --after, not both", fs.Name())
	}
	c, closeFn, err := cf.connect(ctx, a, fs)
	if err != nil {
		return err
	}
	defer closeFn()
	msgs, err := c.History(ctx, *conv, client.HistoryOptions{BeforeSeq: *before, AfterSeq: *after, Limit: *limit})
	if err != nil {
		return explainChat(err, fs, *cf.user, *conv)
	}
	if *cf.json {
		if msgs == nil {
			msgs = []client.Message{}
		}
		return printJSON(a.stdout, map[string]any{"messages": msgs})
	}
	if len(msgs) == 0 {
		fmt.Fprintf(a.stdout, "conversation %d has no messages here yet\n", *conv)
	}
	for _, m := range msgs {
		if m.Kind == client.KindSystem {
			fmt.Fprintf(a.stdout, "[conv %d #%d] %s\n", m.ConversationID, m.Seq, m.SystemText(nil))
			continue
		}
		fmt.Fprintf(a.stdout, "[conv %d #%d] user %d: %s\n", m.ConversationID, m.Seq, m.SenderID, m.Body)
	}
	return nil
}
