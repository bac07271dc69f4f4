package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/chatd/chatd/client"
)

func runTail(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("tail", "tail --user N [--conversation ID] [--count N] [--json]",
		"Follow a user's events as they happen, one line each, until Ctrl-C:\n  [conv 3 #42] user 1: hello\n  [conv 3 #43] user 1 edited #42: hello all\n  [conv 3 #44] user 2 reacted 👍 to #42 (👍 1)\n  [conv 3] user 2 read up to #44\nMessages and their edits, recalls and reactions come in order per\nconversation, each once.\n\nchatd ends a connection when its token expires: without --token, chatctl\nmints a new token for each connection, so tail runs for as long as you\nlet it; with --token, tail exits 1 once chatd refuses that token\n(expired or revoked).",
		"chatctl tail --user 2",
		"chatctl tail --user 2 --conversation 3 --count 1    # wait for the next message")
	conv := cf.fs.Int64("conversation", 0, "only this conversation's events")
	count := cf.fs.Int("count", 0, "exit after this many messages (0: run until Ctrl-C)")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if err := optionalIDs(cf.fs, "conversation"); err != nil {
		return err
	}
	if *count < 0 {
		return usagef("%s: --count must not be negative (0: run until Ctrl-C)", cf.fs.Name())
	}
	// A tail outlives the token chatctl mints (commandTokenTTL), and
	// chatd ends a connection when its token expires.
	cf.renewToken = true
	cf.long = true
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		broker, _ := cf.brokerURL(a) // connected to it already
		fmt.Fprintf(a.stderr, "following the events of user %d on %s (Ctrl-C to stop)\n", *cf.user, broker)
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		refused := make(chan error, 1)
		if *cf.token != "" {
			go watchToken(wctx, c, refused)
		}
		seen := 0
		for {
			select {
			case <-ctx.Done():
				return nil
			case err := <-refused:
				return hint(err, "chatd refused --token for user %d (it expired, or was revoked): pass a new one, or leave --token out and chatctl mints one for each connection", *cf.user)
			case ev, ok := <-c.Events():
				if !ok {
					return nil
				}
				if *conv != 0 && ev.ConversationID != *conv {
					continue
				}
				if err := printEvent(a.stdout, ev, *cf.json); err != nil {
					return err
				}
				if ev.Type == client.EventMessageNew {
					seen++
					if *count > 0 && seen >= *count {
						return nil
					}
				}
			}
		}
	})
}

// watchToken sends on refused when c, connected with a --token, lost its
// connection and chatd refuses the token since: nothing would arrive any
// more.
func watchToken(ctx context.Context, c *client.Client, refused chan<- error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.Connected() {
			continue
		}
		if err := c.AwaitConnection(ctx); errors.Is(err, client.ErrUnauthorized) {
			refused <- err
			return
		}
	}
}

// printEvent writes one event as a line for people, or as JSON.
func printEvent(w io.Writer, ev client.Event, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var err error
	switch ev.Type {
	case client.EventMessageNew:
		_, err = fmt.Fprintf(w, "[conv %d #%d] user %d%s: %s\n", ev.ConversationID, ev.Seq, ev.SenderID, refNote(ev.ReplyTo, ev.ForwardedFrom), oneLine(ev.Body))
	case client.EventMessageEdited:
		if ev.BodyHidden {
			_, err = fmt.Fprintf(w, "[conv %d #%d] user %d edited #%d (its text is hidden from you)\n", ev.ConversationID, ev.Seq, ev.SenderID, ev.TargetSeq)
			break
		}
		_, err = fmt.Fprintf(w, "[conv %d #%d] user %d edited #%d: %s\n", ev.ConversationID, ev.Seq, ev.SenderID, ev.TargetSeq, oneLine(ev.Body))
	case client.EventMessageRecalled:
		_, err = fmt.Fprintf(w, "[conv %d #%d] user %d recalled #%d\n", ev.ConversationID, ev.Seq, ev.ActorID, ev.TargetSeq)
	case client.EventReactionUpdated:
		switch {
		case ev.Emoji == "": // a large group's bodiless event
			_, err = fmt.Fprintf(w, "[conv %d #%d] user %d changed a reaction on #%d\n", ev.ConversationID, ev.Seq, ev.UserID, ev.TargetSeq)
		case ev.On:
			_, err = fmt.Fprintf(w, "[conv %d #%d] user %d reacted %s to #%d (%s %d)\n", ev.ConversationID, ev.Seq, ev.UserID, ev.Emoji, ev.TargetSeq, ev.Emoji, ev.Count)
		default:
			_, err = fmt.Fprintf(w, "[conv %d #%d] user %d removed %s from #%d (%s %d)\n", ev.ConversationID, ev.Seq, ev.UserID, ev.Emoji, ev.TargetSeq, ev.Emoji, ev.Count)
		}
	case client.EventReadUpdated:
		_, err = fmt.Fprintf(w, "[conv %d] user %d read up to #%d\n", ev.ConversationID, ev.UserID, ev.Seq)
	case client.EventDeliveryUpdated:
		_, err = fmt.Fprintf(w, "[conv %d] user %d received up to #%d\n", ev.ConversationID, ev.UserID, ev.Seq)
	case client.EventConversationCreated:
		_, err = fmt.Fprintf(w, "[conv %d] %s conversation %q created by user %d with members %v\n",
			ev.ConversationID, strings.ToLower(ev.ConversationType), ev.Title, ev.ActorID, ev.Members)
	case client.EventMemberAdded:
		by := ""
		if ev.ActorID != 0 && ev.ActorID != ev.UserID {
			by = fmt.Sprintf(", added by user %d", ev.ActorID)
		}
		_, err = fmt.Fprintf(w, "[conv %d] user %d joined (%s%s)\n", ev.ConversationID, ev.UserID, ev.Role, by)
	case client.EventMemberRemoved:
		_, err = fmt.Fprintf(w, "[conv %d] user %d removed by user %d\n", ev.ConversationID, ev.UserID, ev.ActorID)
	case client.EventSystemNew:
		_, err = fmt.Fprintf(w, "[conv %d #%d] %s\n", ev.ConversationID, ev.Seq, client.SystemText(ev, nil))
	case client.EventConversationUpdated:
		_, err = fmt.Fprintf(w, "[conv %d] group is now %q (history %s)\n", ev.ConversationID, ev.Title, ev.HistoryVisible)
	case client.EventMemberUpdated:
		_, err = fmt.Fprintf(w, "[conv %d] user %d is now %s\n", ev.ConversationID, ev.UserID, ev.Role)
	case client.EventProfileUpdated:
		_, err = fmt.Fprintf(w, "user %d is now called %q\n", ev.UserID, ev.DisplayName)
	case client.EventTyping:
		_, err = fmt.Fprintf(w, "[conv %d] user %d is typing\n", ev.ConversationID, ev.UserID)
	case client.EventPresence:
		state := "went offline"
		switch {
		case ev.Hidden:
			state = "hides their presence from you"
		case ev.Online != nil && *ev.Online:
			state = "is online"
		}
		_, err = fmt.Fprintf(w, "user %d %s\n", ev.UserID, state)
	case client.EventError:
		_, err = fmt.Fprintf(w, "[conv %d] error %s: %s\n", ev.ConversationID, ev.Code, ev.Message)
	default:
		b, _ := json.Marshal(ev)
		_, err = fmt.Fprintf(w, "[conv %d] %s %s\n", ev.ConversationID, ev.Type, b)
	}
	return err
}

// refNote says what a message refers to: " (reply to #S)" or
// " (forwarded from conv C #S)", else "".
func refNote(reply *client.ReplyRef, fwd *client.ForwardRef) string {
	switch {
	case reply != nil:
		return replyNote(reply.Seq)
	case fwd != nil:
		return fmt.Sprintf(" (forwarded from conv %d #%d)", fwd.ConversationID, fwd.Seq)
	}
	return ""
}
