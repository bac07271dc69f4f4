package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/chatd/chatd/client"
)

func runInbox(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("inbox", "inbox --user N [--limit 20] [--json]",
		"List a user's conversations, most recent activity first, with the unread\ncount and the last message.",
		"chatctl inbox --user 1")
	limit := cf.fs.Int("limit", 20, "how many conversations (at most 200)")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("%s: --limit must not be negative (at most 200 conversations)", cf.fs.Name())
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		page, err := c.Inbox(ctx, client.InboxOptions{Limit: *limit})
		if err != nil {
			return cf.explain(err, 0)
		}
		if *cf.json {
			return printJSON(a.stdout, page)
		}
		if len(page.Conversations) == 0 {
			fmt.Fprintf(a.stdout, "user %d has no conversations yet; start one with `chatctl send --user %d --peer 2 --body hello`\n", *cf.user, *cf.user)
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONV\tTYPE\tTITLE\tLAST\tUNREAD\tLAST MESSAGE")
		for _, e := range page.Conversations {
			last := ""
			if m := e.LastMessage; m != nil {
				last = fmt.Sprintf("user %d: %s", m.SenderID, ellipsis(messageState(*m), 60))
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t#%d\t%d\t%s\n", e.ID, e.Type, strconv.Quote(e.Title), e.LastSeq, e.Unread, last)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write inbox: %w", err)
		}
		if page.NextCursor != "" {
			fmt.Fprintf(a.stdout, "(more: raise --limit)\n")
		}
		return nil
	})
}

// ellipsis shortens s to at most n runes.
func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
