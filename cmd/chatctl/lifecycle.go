package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// The message lifecycle commands (docs/protocol.md "Message lifecycle"):
// edit, recall and react change a message; each change is an entry of the
// conversation's stream with a seq of its own, which is what they print.
// forward (and send --reply-to) send a message that refers to another.

func runEdit(ctx context.Context, a *app, args []string) error {
	fs := newFlags("edit", "edit --user N --conversation ID --seq SEQ --body TEXT",
		"Replace the body of your message --seq, over MQTT like any client. The edit\nis an entry of the conversation with a seq of its own (printed); members get\nmessage.edited and history shows the message with its new body and\n\"editedAt\". Only the sender may edit, within CHAT_EDIT_WINDOW (default 48h).\n--body - reads the new body from stdin. Retried with its --client-msg-id after\nthe message was recalled, edit prints that it is gone for everyone.",
		`chatctl edit --user 1 --conversation 3 --seq 42 --body "fixed the typo"`)
	ch := addChangeFlags(fs, "edit", "edit")
	body := fs.String("body", "", `the new text (- reads stdin; "" clears the text of a message with files)`)
	if err := ch.parse(a, args); err != nil {
		return err
	}
	// --body "" is an edit too: it clears the text of a message with
	// attachments (chatd refuses it for a text message).
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "body" })
	if !given {
		return usagef(`%s: --body is required: the new text, e.g. --body "fixed" (or --body - for stdin; --body "" clears a photo's text)`, fs.Name())
	}
	if err := checkClientMsgID(fs, ch.id); err != nil {
		return err
	}
	text, err := readBody(a, *body)
	if err != nil {
		return err
	}
	return ch.apply(ctx, a, "edit", client.Change{Kind: client.KindEdit, Body: text}, func(out client.Outcome) error {
		cf, conv, seq, id, entry := ch.chat, ch.conv, ch.seq, ch.id, out.Seq
		if *cf.json {
			return printJSON(a.stdout, withRecalled(map[string]any{"conversationId": *conv, "seq": entry, "targetSeq": *seq, "clientMsgId": *id, "body": text}, out))
		}
		if out.Recalled {
			fmt.Fprintf(a.stdout, "[conv %d #%d] user %d edited #%d: %s\n", *conv, entry, *cf.user, *seq, recalledSince)
			return nil
		}
		fmt.Fprintf(a.stdout, "[conv %d #%d] user %d edited #%d: %s\n", *conv, entry, *cf.user, *seq, oneLine(text))
		return nil
	})
}

func runRecall(ctx context.Context, a *app, args []string) error {
	fs := newFlags("recall", "recall --user N --conversation ID --seq SEQ",
		"Take message --seq back for everyone (\"delete for everyone\"). Its body and\nthe bodies of its edits are erased from the database; members get\nmessage.recalled and history keeps the message as \"recalled\": true. The\nsender may recall within CHAT_RECALL_WINDOW (default 24h), a group's owner\nor admin at any time. Recalling again changes nothing and prints the first\nrecall's seq.",
		"chatctl recall --user 1 --conversation 3 --seq 42")
	ch := addChangeFlags(fs, "recall", "recall")
	if err := ch.parse(a, args); err != nil {
		return err
	}
	if err := checkClientMsgID(fs, ch.id); err != nil {
		return err
	}
	return ch.apply(ctx, a, "recall", client.Change{Kind: client.KindRecall}, func(out client.Outcome) error {
		entry := out.Seq
		cf, conv, seq, id := ch.chat, ch.conv, ch.seq, ch.id
		if *cf.json {
			return printJSON(a.stdout, map[string]any{"conversationId": *conv, "seq": entry, "targetSeq": *seq, "clientMsgId": *id})
		}
		fmt.Fprintf(a.stdout, "[conv %d #%d] user %d recalled #%d for everyone\n", *conv, entry, *cf.user, *seq)
		return nil
	})
}

func runReact(ctx context.Context, a *app, args []string) error {
	fs := newFlags("react", "react --user N --conversation ID --seq SEQ --emoji EMOJI [--off]",
		"Set your reaction --emoji on message --seq, or remove it with --off. A change\nis an entry with a seq of its own (printed); members get reaction.updated with\nthe emoji's new count. Setting a reaction you already set, or removing one you\ndid not, changes nothing and says so. At most 20 different emoji per user\nand message, and 20 on a message in all (a new one past them is refused\nwith too_many_reactions).",
		"chatctl react --user 2 --conversation 3 --seq 42 --emoji 👍",
		"chatctl react --user 2 --conversation 3 --seq 42 --emoji 👍 --off")
	ch := addChangeFlags(fs, "react to", "reaction")
	emoji := fs.String("emoji", "", "the reaction: 1-32 bytes without spaces, e.g. 👍")
	off := fs.Bool("off", false, "remove the reaction instead of setting it")
	if err := ch.parse(a, args); err != nil {
		return err
	}
	if *emoji == "" {
		return usagef("%s: --emoji is required, e.g. --emoji 👍", fs.Name())
	}
	if err := checkClientMsgID(fs, ch.id); err != nil {
		return err
	}
	on := !*off
	return ch.apply(ctx, a, "react to", client.Change{Kind: client.KindReaction, Emoji: *emoji, On: on}, func(out client.Outcome) error {
		entry := out.Seq
		cf, conv, seq, id := ch.chat, ch.conv, ch.seq, ch.id
		if *cf.json {
			return printJSON(a.stdout, map[string]any{"conversationId": *conv, "seq": entry, "targetSeq": *seq, "clientMsgId": *id,
				"emoji": *emoji, "on": on, "changed": entry != 0})
		}
		switch {
		case entry == 0 && on:
			fmt.Fprintf(a.stdout, "[conv %d] user %d had already reacted %s to #%d; nothing changed\n", *conv, *cf.user, *emoji, *seq)
		case entry == 0:
			fmt.Fprintf(a.stdout, "[conv %d] user %d had no %s on #%d; nothing changed\n", *conv, *cf.user, *emoji, *seq)
		case on:
			fmt.Fprintf(a.stdout, "[conv %d #%d] user %d reacted %s to #%d\n", *conv, entry, *cf.user, *emoji, *seq)
		default:
			fmt.Fprintf(a.stdout, "[conv %d #%d] user %d removed %s from #%d\n", *conv, entry, *cf.user, *emoji, *seq)
		}
		return nil
	})
}

func runForward(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("forward", "forward --user N (--conversation ID | --peer N) --from-conversation ID --seq SEQ",
		"Forward message --seq of --from-conversation into --conversation (or the\ndirect conversation with --peer): a new message that copies its body and\ncarries \"forwardedFrom\". --user must be a member of both; a recalled message\ncannot be forwarded. Forwarding into the same conversation is allowed.",
		"chatctl forward --user 1 --conversation 4 --from-conversation 3 --seq 42",
		"chatctl forward --user 1 --peer 5 --from-conversation 3 --seq 42")
	conv := cf.fs.Int64("conversation", 0, "conversation to forward into")
	peer := cf.fs.Int64("peer", 0, "forward into the direct conversation with this user instead")
	from := cf.fs.Int64("from-conversation", 0, "conversation of the message to forward")
	seq := cf.fs.Int64("seq", 0, "seq of the message to forward, in --from-conversation")
	id := cf.fs.String("client-msg-id", "", "UUID making the forward idempotent (default: a new one); reuse it to retry safely")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if err := noNegativeIDs(cf.fs, required{"conversation", *conv, "the conversation to forward into"}, required{"peer", *peer, "the user to forward to"}); err != nil {
		return err
	}
	if (*conv == 0) == (*peer == 0) {
		return usagef("%s: give exactly one of --conversation ID and --peer USER: where to forward to", cf.fs.Name())
	}
	if err := requireIDs(cf.fs, required{"from-conversation", *from, "the conversation of the message to forward"},
		required{"seq", *seq, "the seq of the message to forward (see `chatctl history`)"}); err != nil {
		return err
	}
	if err := checkClientMsgID(cf.fs, id); err != nil {
		return err
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if *peer != 0 {
			if err := checkForwardable(ctx, c, cf, *from, *seq); err != nil {
				return err
			}
		}
		if err := cf.openPeer(ctx, c, conv, *peer); err != nil {
			return err
		}
		ref := &client.MessageRef{ConversationID: *from, Seq: *seq}
		var sent int64
		err := cf.storeWithin(ctx, *id, func(ctx context.Context) (err error) {
			sent, err = c.SendMessage(ctx, *conv, "", client.SendOptions{Forward: ref, ClientMsgID: *id})
			return err
		})
		if err != nil {
			return explainForward(err, cf.fs, *cf.user, *conv, *from, *seq)
		}
		// The forward's body is the server's copy: read it back to show what
		// was sent (best effort; the forward is committed either way).
		body := ""
		if ms, err := c.History(ctx, *conv, client.HistoryOptions{AfterSeq: sent - 1, Forward: true, Limit: 1}); err == nil && len(ms) == 1 && ms[0].Seq == sent {
			body = ms[0].Body
		}
		if *cf.json {
			return printJSON(a.stdout, map[string]any{"conversationId": *conv, "seq": sent, "clientMsgId": *id, "body": body,
				"forwardedFrom": map[string]int64{"conversationId": *from, "seq": *seq}})
		}
		fmt.Fprintf(a.stdout, "[conv %d #%d] user %d (forwarded from conv %d #%d): %s\n", *conv, sent, *cf.user, *from, *seq, body)
		return nil
	})
}

// checkForwardable reads message seq of conversation from as the user may
// read it, before forward --peer opens a direct conversation: one opened
// for a forward chatd then refuses would stay behind, empty. chatd still
// judges the forward; this only answers its plain refusals (not a member
// of from, no such message, recalled) before anything is created.
func checkForwardable(ctx context.Context, c *client.Client, cf chatFlags, from, seq int64) error {
	ms, err := c.History(ctx, from, client.HistoryOptions{AfterSeq: seq - 1, Forward: true, Limit: 1})
	refusal := func(code, format string, args ...any) error {
		return explainForward(&client.Error{Op: "forward", Code: code, Message: fmt.Sprintf(format, args...)}, cf.fs, *cf.user, 0, from, seq)
	}
	switch {
	case errors.Is(err, client.ErrNotMember):
		return refusal("forbidden", "not a member of conversation %d, the forwarded message's", from)
	case err != nil:
		return explainForward(err, cf.fs, *cf.user, 0, from, seq)
	case len(ms) == 0 || ms[0].Seq != seq || (ms[0].Kind != "" && ms[0].Kind != client.KindMessage) || ms[0].Recalled:
		return refusal("not_found", "there is no message %d in conversation %d to forward (or it was recalled)", seq, from)
	}
	return nil
}

// changeFlags are the flags of edit, recall and react: who changes which
// message, under which client message id.
type changeFlags struct {
	chat      chatFlags
	conv, seq *int64
	id        *string
}

// addChangeFlags adds the flags of a change: verb is what it does to the
// message ("react to"), what what its id makes idempotent ("reaction").
func addChangeFlags(fs *flag.FlagSet, verb, what string) changeFlags {
	return changeFlags{
		chat: addChatFlags(fs),
		conv: fs.Int64("conversation", 0, "conversation id"),
		seq:  fs.Int64("seq", 0, "seq of the message to "+verb),
		id:   addClientMsgIDFlag(fs, what),
	}
}

// parse parses args and checks --conversation and --seq.
func (ch changeFlags) parse(a *app, args []string) error {
	if err := ch.chat.parse(a, args); err != nil {
		return err
	}
	return requireTarget(ch.chat.fs, *ch.conv, *ch.seq)
}

// apply connects and applies change to the message the flags name, then
// prints the result with the seq of its entry, still connected; a refusal
// is explained for verb.
func (ch changeFlags) apply(ctx context.Context, a *app, verb string, change client.Change, print func(client.Outcome) error) error {
	return ch.chat.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		change.ConversationID, change.ClientMsgID, change.TargetSeq = *ch.conv, *ch.id, *ch.seq
		var out client.Outcome
		err := ch.chat.storeWithin(ctx, *ch.id, func(ctx context.Context) (err error) {
			out, err = c.Commit(ctx, change)
			return err
		})
		if err != nil {
			return explainChange(err, ch.chat.fs, verb, *ch.chat.user, *ch.conv, *ch.seq)
		}
		return print(out)
	})
}

// recalledSince is what a retried send or edit prints, with exit status
// 0, when chatd answers that the message was recalled since the first
// attempt committed: sending it again would store a new message.
const recalledSince = "recalled since; it is gone for everyone"

// withRecalled adds "recalled": true to a JSON answer when chatd said so.
func withRecalled(m map[string]any, out client.Outcome) map[string]any {
	if out.Recalled {
		m["recalled"] = true
	}
	return m
}

// addClientMsgIDFlag is the --client-msg-id flag of a change.
func addClientMsgIDFlag(fs *flag.FlagSet, what string) *string {
	return fs.String("client-msg-id", "", fmt.Sprintf("UUID making the %s idempotent (default: a new one); reuse it to retry safely", what))
}

// checkClientMsgID fills in a new id, or checks the given one.
func checkClientMsgID(fs *flag.FlagSet, id *string) error {
	if *id == "" {
		*id = uuid.NewString()
		return nil
	}
	if _, err := uuid.Parse(*id); err != nil {
		return usagef("%s: --client-msg-id %q is not a UUID", fs.Name(), *id)
	}
	return nil
}

// requireTarget checks --conversation and --seq of a change.
func requireTarget(fs *flag.FlagSet, conv, seq int64) error {
	return requireIDs(fs, required{"conversation", conv, "the conversation id"}, required{"seq", seq, "the seq of the message (see `chatctl history`)"})
}

// readBody is the text of --body, from stdin for "-".
func readBody(a *app, body string) (string, error) {
	if body != "-" {
		return body, nil
	}
	b, err := io.ReadAll(a.stdin())
	if err != nil {
		return "", fmt.Errorf("read body from stdin: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// explainChange turns the refusal of an edit, recall or reaction into what
// to do next. The server's message says which rule refused it.
func explainChange(err error, fs *flag.FlagSet, verb string, user, conv, seq int64) error {
	historyCmd := fmt.Sprintf("`chatctl history --user %d --conversation %d`", user, conv)
	switch {
	case errors.Is(err, client.ErrNotMember):
		return explainChat(err, fs, user, conv)
	case errors.Is(err, client.ErrNotFound):
		return hint(err, "%v: conversation %d has no message #%d to %s (edits, recalls and reactions have seqs too, but only messages can be changed); list the messages with %s",
			err, conv, seq, verb, historyCmd)
	case errors.Is(err, client.ErrGone):
		return hint(err, "%v: message #%d was recalled for everyone, so there is nothing left to %s", err, seq, verb)
	case errors.Is(err, client.ErrForbidden):
		return hint(err, "%v: user %d may not %s #%d; see who sent it with %s", err, user, verb, seq, historyCmd)
	}
	return explainChat(err, fs, user, conv)
}

// explainForward explains a refused forward (or reply): the source is the
// usual culprit.
func explainForward(err error, fs *flag.FlagSet, user, conv, from, seq int64) error {
	switch {
	case errors.Is(err, client.ErrForbidden):
		return hint(err, "%v: user %d must be a member of conversation %d to forward from it; list the user's conversations with `chatctl inbox --user %d`",
			err, user, from, user)
	case errors.Is(err, client.ErrNotFound):
		return hint(err, "%v: conversation %d has no message #%d that can be forwarded (recalled messages cannot); list them with `chatctl history --user %d --conversation %d`",
			err, from, seq, user, from)
	}
	return explainChat(err, fs, user, conv)
}
