package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
)

func TestNonMembersCanNeitherWriteNorRead(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	mustSend(t, st, conv.ID, 1, "secret")
	const stranger = 99
	outboxBefore := len(outboxEvents(t, pool, conv.ID, ""))

	check := func(who int64, code chat.Code) {
		t.Helper()
		_, err := st.Send(ctx, sendReq(conv.ID, who, "let me in"))
		wantCode(t, "send", err, code)
		_, err = st.History(ctx, chat.HistoryQuery{ConversationID: conv.ID, UserID: who})
		wantCode(t, "history", err, code)
		_, err = st.History(ctx, chat.HistoryQuery{ConversationID: conv.ID, UserID: who, AfterSeq: 1})
		wantCode(t, "history after", err, code)
		_, err = st.MarkRead(ctx, conv.ID, who, 1)
		wantCode(t, "mark read", err, code)
		_, err = st.SeenBy(ctx, conv.ID, who, 1)
		wantCode(t, "seen by", err, code)
		_, err = st.GetConversation(ctx, conv.ID, who)
		wantCode(t, "get conversation", err, code)
		page, err := st.Inbox(ctx, who, 0, "")
		if err != nil || len(page.Conversations) != 0 {
			t.Fatalf("inbox of %d: %+v, %v", who, page, err)
		}
	}
	check(stranger, chat.CodeNotMember)

	// Leaving takes every right away.
	mustRemove(t, ctx, st, conv.ID, 2, 2, "user 2 leaves")
	check(2, chat.CodeNotMember)

	// The message and the leave's system entry.
	if n := queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv.ID); n != 2 {
		t.Fatalf("last_seq = %d after refused sends", n)
	}
	if n := len(outboxEvents(t, pool, conv.ID, "")); n != outboxBefore+2 { // member.removed, system.new
		t.Fatalf("refused calls wrote %d events", n-outboxBefore-2)
	}
	if ok, err := st.IsMember(ctx, conv.ID, stranger); err != nil || ok {
		t.Fatalf("IsMember(stranger) = %v, %v", ok, err)
	}
}

func TestUnknownConversationIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	mustGroup(t, st, 1, 2)
	const missing = 424242
	_, err := st.Send(ctx, sendReq(missing, 1, "hello?"))
	wantCode(t, "send", err, chat.CodeNotFound)
	_, err = st.History(ctx, chat.HistoryQuery{ConversationID: missing, UserID: 1})
	wantCode(t, "history", err, chat.CodeNotFound)
	_, err = st.MarkRead(ctx, missing, 1, 1)
	wantCode(t, "mark read", err, chat.CodeNotFound)
	_, err = st.SeenBy(ctx, missing, 1, 1)
	wantCode(t, "seen by", err, chat.CodeNotFound)
	_, err = st.GetConversation(ctx, missing, 1)
	wantCode(t, "get conversation", err, chat.CodeNotFound)
	_, _, err = st.AddMember(ctx, missing, 1, 2, chat.RoleMember)
	wantCode(t, "add member", err, chat.CodeNotFound)
	err = st.RemoveMember(ctx, missing, 1, 2)
	wantCode(t, "remove member", err, chat.CodeNotFound)
	ids, err := st.Members(ctx, missing)
	if err != nil || len(ids) != 0 {
		t.Fatalf("members of a missing conversation: %v, %v", ids, err)
	}
}
