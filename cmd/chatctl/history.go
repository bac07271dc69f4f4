package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/chatd/chatd/client"
)

func runHistory(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("history", "history --user N --conversation ID [--limit 20] [--before SEQ | --after SEQ] [--json]",
		"Print a conversation's messages, oldest first: the newest --limit by default,\nthose before --before, or those after --after. Each message shows as it is\nnow: its latest body and \"(edited)\", \"(recalled)\", what it replies to or\nforwards, and its reactions [👍 2]. Edits, recalls and reactions are entries\nwith seqs of their own: --limit counts them, the text folds them into their\nmessages, --json lists them too.",
		"chatctl history --user 1 --conversation 3",
		"chatctl history --user 1 --conversation 3 --after 40 --limit 100")
	conv := cf.fs.Int64("conversation", 0, "conversation id")
	limit := cf.fs.Int("limit", 20, "how many messages (at most 200)")
	before := cf.fs.Int64("before", 0, "only messages before this seq")
	after := cf.fs.Int64("after", 0, "only messages after this seq")
	if err := cf.parseConversation(a, args, conv); err != nil {
		return err
	}
	if *before != 0 && *after != 0 {
		return usagef("%s: give --before or --after, not both", cf.fs.Name())
	}
	if *before < 0 || *after < 0 {
		name := "before"
		if *after < 0 {
			name = "after"
		}
		return usagef("%s: --%s must be a positive seq (leave it out for the newest messages)", cf.fs.Name(), name)
	}
	if *limit < 0 {
		return usagef("%s: --limit must not be negative (at most 200 messages)", cf.fs.Name())
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		msgs, err := c.History(ctx, *conv, client.HistoryOptions{BeforeSeq: *before, AfterSeq: *after, Limit: *limit})
		if err != nil {
			return cf.explain(err, *conv)
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
			if m.Kind != client.KindMessage && m.Kind != "" {
				continue // folded into the message it changed
			}
			fmt.Fprintf(a.stdout, "[conv %d #%d] user %d%s: %s\n", m.ConversationID, m.Seq, m.SenderID, refNote(m.ReplyTo, m.ForwardedFrom), messageState(m))
		}
		return nil
	})
}

// messageState is a message's text as it is now: its body, "(edited)",
// its reactions, or "(recalled)" once taken back.
func messageState(m client.Message) string {
	if m.Recalled {
		return "(recalled)"
	}
	var b strings.Builder
	b.WriteString(oneLine(m.Body))
	if m.EditedAt != nil {
		b.WriteString(" (edited)")
	}
	for i, r := range m.Reactions {
		if i == 0 {
			b.WriteString(" [")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", r.Emoji, r.Count)
		if i == len(m.Reactions)-1 {
			b.WriteString("]")
		}
	}
	return b.String()
}
