package main

import (
	"context"
	"fmt"

	"github.com/chatd/chatd/client"
)

func runRead(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("read", "read --user N --conversation ID [--seq SEQ]",
		"Mark a conversation read by --user up to --seq (default: its latest message);\nthe other members get read.updated. The watermark never moves backwards.",
		"chatctl read --user 2 --conversation 3",
		"chatctl read --user 2 --conversation 3 --seq 42")
	conv := cf.fs.Int64("conversation", 0, "conversation id")
	seq := cf.fs.Int64("seq", 0, "read up to this seq (default: the latest)")
	if err := cf.parseConversation(a, args, conv); err != nil {
		return err
	}
	if *seq < 0 {
		return usagef("%s: --seq must be positive", cf.fs.Name())
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		upTo := *seq
		if upTo == 0 {
			cv, err := c.Conversation(ctx, *conv)
			if err != nil {
				return cf.explain(err, *conv)
			}
			if cv.LastSeq == 0 {
				fmt.Fprintf(a.stdout, "conversation %d has no messages yet; nothing to read\n", *conv)
				return nil
			}
			upTo = cv.LastSeq
		}
		r, err := c.MarkReadNow(ctx, *conv, upTo)
		if err != nil {
			return cf.explain(err, *conv)
		}
		if *cf.json {
			return printJSON(a.stdout, map[string]any{"conversationId": *conv, "advanced": r.Advanced, "lastReadSeq": r.LastReadSeq})
		}
		if r.Advanced {
			fmt.Fprintf(a.stdout, "[conv %d] user %d read up to #%d\n", *conv, *cf.user, r.LastReadSeq)
		} else {
			fmt.Fprintf(a.stdout, "[conv %d] user %d had already read up to #%d\n", *conv, *cf.user, r.LastReadSeq)
		}
		return nil
	})
}
