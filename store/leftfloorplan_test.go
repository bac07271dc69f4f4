package store_test

import (
	"context"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A former member's catch-up finds their own join (their history floor
// at the leave) among the member.added entries that name them, not by
// walking every system entry of the group back from the leave: in a
// group that 1,000 members joined while they were in it, it reads a
// handful of system entries.
func TestAFormerMembersCatchUpFindsTheirJoinWithoutReadingEveryLaterJoin(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, st := storeAndURL(t)
	g := mustGroup(t, st, 1, 2)
	const owner, gone = 1, 8
	secret := mustSend(t, st, g.ID, owner, "before you came")
	mustAdd(t, ctx, st, g.ID, owner, gone, "")
	thousandJoins(t, ctx, pool, g.ID) // after theirs
	ed := mustChange(t, st, edit(g.ID, owner, secret.Seq, "edited secret"))
	mustRemove(t, ctx, st, g.ID, gone, gone, "gone leaves")
	mustExec(t, ctx, pool, `ANALYZE message`)

	catchUpOnHiddenEdit(t, ctx, url, gone, ed.Entry, []string{"message_system_idx", "message_visibility_idx", "message_member_added_idx"})
}

// thousandJoins writes 1,000 member.added entries into conv (users 1000
// to 1999), encoded as AddMember records them.
func thousandJoins(t *testing.T, ctx context.Context, pool *pgxpool.Pool, conv int64) {
	t.Helper()
	bodies := make([]string, 1000)
	for i := range bodies {
		b, err := chat.EncodeSystemEntry(chat.SystemEntry{Action: chat.SystemMemberAdded, UserID: int64(1000 + i), Role: chat.RoleMember})
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	mustExec(t, ctx, pool, `
		WITH c AS (UPDATE conversation SET last_seq = last_seq + cardinality($2::text[]) WHERE id = $1
		           RETURNING last_seq - cardinality($2::text[]) AS base)
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, kind, msg_no)
		SELECT $1, c.base + b.n, 1, gen_random_uuid(), b.body, 'system', 0
		FROM c, unnest($2::text[]) WITH ORDINALITY AS b(body, n)`, conv, bodies)
	mustExec(t, ctx, pool, `ANALYZE message`)
}

// catchUpOnHiddenEdit has the former member user catch up on edit (of a
// message from before their join) and checks that it comes without its
// body, reading at most 10 entries of the indexes named.
func catchUpOnHiddenEdit(t *testing.T, ctx context.Context, url string, user int64, edit chat.Message, indexes []string) {
	t.Helper()
	read := indexesStat(t, url, indexes, "idx_tup_read", func(_ *store.Store, sess *store.Sessions) {
		got := sinceOne(t, ctx, sess, user, chat.Range{ConversationID: edit.ConversationID, After: edit.Seq - 1, Until: edit.Seq})
		if len(got) != 1 || got[0].Kind != chat.KindEdit || !got[0].BodyHidden {
			t.Errorf("the former member catches up on %+v; want the edit without its body", got)
		}
	})
	if read > 10 {
		t.Errorf("the former member's catch-up read %d system entries, want at most 10", read)
	}
}
