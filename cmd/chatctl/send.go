package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
)

func runSend(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("send", "send --user N (--conversation ID | --peer N) (--body TEXT | --file PATH...) [--reply-to SEQ]",
		"Send a message as --user, over MQTT like any client, and print the seq chatd\nassigned once it is committed. --peer sends to the direct conversation with\nthat user (opening it if needed). --body - reads the body from stdin.\n--reply-to quotes a message of the same conversation (members see its first\n100 characters above the reply).\n--file uploads a file (repeat it, up to 10) and sends it as an attachment;\nthe body is then optional. Uploads go to chatd's HTTP API (--http) or,\nwith an object store, straight to it.\nWith --peer, --reply-to needs the direct conversation to exist already, and\nthe files are checked for their size (max_upload_bytes) before it is opened;\na file chatd refuses for another reason (its type, the upload rate, the\nday's quota) once --peer opened a new conversation leaves it open, empty.\nRetried with its --client-msg-id after the message was recalled, send prints\nthat it is gone for everyone (\"recalled\": true with --json) and exits 0:\nit was sent once, and is not sent again.",
		`chatctl send --user 1 --peer 2 --body "hello"`,
		`chatctl send --user 1 --conversation 3 --body "hi team"`,
		`chatctl send --user 2 --conversation 3 --reply-to 42 --body "agreed"`,
		`chatctl send --user 1 --peer 2 --file holiday.jpg --body "the view"`)
	conv := cf.fs.Int64("conversation", 0, "conversation id")
	peer := cf.fs.Int64("peer", 0, "send to the direct conversation with this user instead")
	body := cf.fs.String("body", "", "message text (- reads stdin)")
	replyTo := cf.fs.Int64("reply-to", 0, "seq of the message (same conversation) this one replies to")
	id := cf.fs.String("client-msg-id", "", "UUID making the send idempotent (default: a new one); reuse it to retry safely")
	var files []string
	cf.fs.Func("file", "a file to attach (repeatable, up to 10)", func(v string) error { files = append(files, v); return nil })
	httpURL := addHTTPFlag(cf.fs)
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if err := noNegativeIDs(cf.fs, required{"conversation", *conv, "the conversation to send into"}, required{"peer", *peer, "the user to send to"}); err != nil {
		return err
	}
	if (*conv == 0) == (*peer == 0) {
		return usagef("%s: give exactly one of --conversation ID and --peer USER", cf.fs.Name())
	}
	if *body == "" && len(files) == 0 {
		return usagef(`%s: --body is required, e.g. --body "hello" (or --body - for stdin), unless --file attaches a file`, cf.fs.Name())
	}
	if len(files) > 10 {
		return usagef("%s: at most 10 files per message, not %d", cf.fs.Name(), len(files))
	}
	if *replyTo < 0 {
		return usagef("%s: --reply-to must be the positive seq of a message, e.g. --reply-to 42", cf.fs.Name())
	}
	if err := checkClientMsgID(cf.fs, id); err != nil {
		return err
	}
	if err := checkFiles(cf.fs, "file", files...); err != nil {
		return err
	}
	if err := checkUploadSizes(cf.fs, a.settings.MaxUploadBytes, files); err != nil {
		return err
	}
	text, err := readBody(a, *body)
	if err != nil {
		return err
	}
	// Checked before anything is created: --peer would open a direct
	// conversation for a message that is never sent. The limits are
	// chatd's own settings, which chatctl reads as chatd does; a message
	// with files may have no text.
	if text != "" || len(files) == 0 {
		if err := a.settings.Limits().ValidateBody(text); err != nil {
			return usagef("%s: --body: %v", cf.fs.Name(), chat.ErrorMessage(err))
		}
	}
	api, err := cf.withHTTP(a, *httpURL, uploadsOverHTTP(a, files...))
	if err != nil {
		return err
	}
	cf.long = len(files) > 0
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if *peer != 0 && *replyTo != 0 {
			// The message replied to is in the direct conversation, so
			// there must be one: opening it would leave a new, empty one.
			d, found, err := directWith(ctx, c, *peer)
			if err != nil {
				return cf.explain(err, 0)
			}
			if !found {
				return fmt.Errorf("%s: --reply-to %d: users %d and %d have no direct conversation yet, so no message to reply to; send without --reply-to",
					cf.fs.Name(), *replyTo, *cf.user, *peer)
			}
			*conv = d
		}
		if *conv == 0 {
			if err := cf.openPeer(ctx, c, conv, *peer); err != nil {
				return err
			}
		}
		var atts []client.Attachment
		for _, p := range files {
			f, err := os.Open(p)
			if err != nil {
				return fmt.Errorf("%s: %w", cf.fs.Name(), err)
			}
			att, err := c.Upload(ctx, *conv, p, f)
			f.Close()
			if err != nil {
				return explainUpload(err, cf.fs, *cf.user, *conv, p)
			}
			atts = append(atts, att)
		}
		refs := make([]client.AttachmentRef, len(atts))
		for i, at := range atts {
			refs[i] = at.Ref()
		}
		var out client.Outcome
		err := cf.storeWithin(ctx, *id, func(ctx context.Context) (err error) {
			out, err = c.Commit(ctx, client.Change{ConversationID: *conv, ClientMsgID: *id, Body: text, ReplyTo: *replyTo, Attachments: refs})
			return err
		})
		if err != nil {
			if *replyTo != 0 && errors.Is(err, client.ErrInvalid) {
				return hint(err, "%v: --reply-to %d must be the seq of a message of conversation %d; list them with `chatctl history --user %d --conversation %d`",
					err, *replyTo, *conv, *cf.user, *conv)
			}
			return cf.explain(err, *conv)
		}
		if *cf.json {
			j := withRecalled(map[string]any{"conversationId": *conv, "seq": out.Seq, "clientMsgId": *id, "attachments": atts}, out)
			if *replyTo != 0 {
				j["replyTo"] = *replyTo
			}
			return printJSON(a.stdout, j)
		}
		if out.Recalled {
			fmt.Fprintf(a.stdout, "[conv %d #%d] user %d%s: %s\n", *conv, out.Seq, *cf.user, replyNote(*replyTo), recalledSince)
			return nil
		}
		fmt.Fprintf(a.stdout, "[conv %d #%d] user %d%s: %s\n", *conv, out.Seq, *cf.user, replyNote(*replyTo), oneLine(text))
		for _, at := range atts {
			fmt.Fprintf(a.stdout, "  attached %s (%s, %d bytes): id %s\n", at.Name, at.ContentType, at.Size, at.ID)
		}
		return nil
	}, api)
}

// directWith finds the caller's direct conversation with peer, if there is
// one, in their inbox, without opening one.
func directWith(ctx context.Context, c *client.Client, peer int64) (id int64, found bool, err error) {
	o := client.InboxOptions{Limit: 200}
	for {
		page, err := c.Inbox(ctx, o)
		if err != nil {
			return 0, false, err
		}
		for _, e := range page.Conversations {
			if e.PeerID == peer {
				return e.ID, true, nil
			}
		}
		if page.NextCursor == "" {
			return 0, false, nil
		}
		o.Cursor = page.NextCursor
	}
}

// checkUploadSizes refuses, before anything is created, the files chatd
// would refuse for their size: empty, or over max (max_upload_bytes,
// chatd's setting, which chatctl reads as chatd does).
func checkUploadSizes(fs *flag.FlagSet, max int64, paths []string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return usagef("%s: --file: %v", fs.Name(), err)
		}
		switch {
		case st.Size() == 0:
			return usagef("%s: --file: %s is empty; attach a file with something in it", fs.Name(), p)
		case st.Size() > max:
			return usagef("%s: --file: %s is %d bytes, more than chatd accepts (max_upload_bytes, CHAT_MAX_UPLOAD_BYTES: %d bytes)", fs.Name(), p, st.Size(), max)
		}
	}
	return nil
}

// replyNote is " (reply to #S)" for a reply, else "".
func replyNote(seq int64) string {
	if seq == 0 {
		return ""
	}
	return fmt.Sprintf(" (reply to #%d)", seq)
}
