package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// recalledLeftovers says what of a recalled message m still shows beyond
// "a message was recalled" (its seq, sender, time and recall), in m and in
// the JSON history and answers carry; "" when nothing.
func recalledLeftovers(t *testing.T, m chat.Message) string {
	t.Helper()
	var left []string
	if !m.Recalled || m.RecalledAt == nil {
		left = append(left, "not recalled")
	}
	if m.ReplyTo != nil || m.ForwardedFrom != nil || m.EditedAt != nil || m.Body != "" || m.MsgType != "" ||
		len(m.Attachments) > 0 || len(m.Reactions) > 0 {
		left = append(left, "fields")
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"replyTo", "forwardedFrom", "editedAt", "body", "msgType", "attachments", "reactions"} {
		if strings.Contains(string(b), `"`+k+`"`) {
			left = append(left, k)
		}
	}
	if len(left) == 0 {
		return ""
	}
	return strings.Join(left, ", ") + " in " + string(b)
}

// TestARecalledMessageReadsWithoutItsQuoteForwardOrEdit: a reply, a
// forward from a conversation the reader is not in, and an edited message
// are recalled. History, the entries the relay and catch-up read, the
// inbox's last message and a resend's answer show each as recalled and
// nothing more: no replyTo, forwardedFrom or editedAt.
func TestARecalledMessageReadsWithoutItsQuoteForwardOrEdit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	g, src := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 3)
	mustSend(t, st, g.ID, 1, "lunch?")
	secret := mustSend(t, st, src.ID, 3, "only for us")
	replyReq := sendReq(g.ID, 1, "at noon")
	replyReq.ReplyTo = 1
	reply := mustSendReq(t, st, replyReq)
	fwdReq := forwardReq(g.ID, 1, src.ID, secret.Seq)
	fwd := mustSendReq(t, st, fwdReq)
	edited := mustSend(t, st, g.ID, 1, "helo")
	mustChange(t, st, edit(g.ID, 1, edited.Seq, "hello"))
	for _, m := range []chat.Message{reply, fwd, edited} {
		mustChange(t, st, change(chat.KindRecall, g.ID, 1, m.Seq))
	}
	recalled := map[int64]string{reply.Seq: "reply", fwd.Seq: "forward", edited.Seq: "edited message"}

	seen := 0
	for _, m := range mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 2, Limit: 50}) {
		if what, ok := recalled[m.Seq]; ok && m.IsMessage() {
			seen++
			if left := recalledLeftovers(t, m); left != "" {
				t.Errorf("history: the recalled %s still shows %s", what, left)
			}
		}
	}
	if seen != len(recalled) {
		t.Fatalf("history has %d of the %d recalled messages", seen, len(recalled))
	}
	var refs []chat.MessageRef
	for seq := range recalled {
		refs = append(refs, chat.MessageRef{ConversationID: g.ID, Seq: seq})
	}
	entries, err := store.NewSessions(pool).Entries(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	for ref, m := range entries {
		if left := recalledLeftovers(t, m); left != "" {
			t.Errorf("entries (relay, catch-up): the recalled %s still shows %s", recalled[ref.Seq], left)
		}
	}
	inbox, err := st.Inbox(ctx, 2, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range inbox.Conversations {
		if c.ID != g.ID {
			continue
		}
		if c.LastMessage == nil || c.LastMessage.Seq != edited.Seq {
			t.Fatalf("inbox: last message %+v, want the recalled %d", c.LastMessage, edited.Seq)
		}
		if left := recalledLeftovers(t, *c.LastMessage); left != "" {
			t.Errorf("inbox: the recalled last message still shows %s", left)
		}
	}
	for what, req := range map[string]chat.SendRequest{"reply": replyReq, "forward": fwdReq} {
		res, err := st.Send(ctx, req)
		if err != nil || !res.Duplicate {
			t.Fatalf("resend of the recalled %s: %+v %v", what, res, err)
		}
		if left := recalledLeftovers(t, res.Message); left != "" {
			t.Errorf("resend's answer: the recalled %s still shows %s", what, left)
		}
	}
}
