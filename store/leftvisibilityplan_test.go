package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A former member's catch-up finds the group's history visibility at
// their leave among the entries that changed it, not by reading every
// membership and settings entry of the group: in a group that 1,000
// members joined before them and that never changed it, it reads a
// handful of system entries (their own member.added, the leave).
func TestAFormerMembersCatchUpFindsTheVisibilityAtTheLeaveWithoutReadingEveryJoin(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, st := storeAndURL(t)
	g := mustGroup(t, st, 1, 2)
	const owner, gone = 1, 8
	// 1,000 joins, as AddMember records them.
	mustExec(t, ctx, pool, `
		WITH c AS (UPDATE conversation SET last_seq = last_seq + 1000 WHERE id = $1 RETURNING last_seq - 1000 AS base)
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, kind, msg_no)
		SELECT $1, c.base + u, 1, gen_random_uuid(), jsonb_build_object('action', 'member.added', 'userId', 1000 + u)::text, 'system', 0
		FROM c, generate_series(1, 1000) u`, g.ID)
	secret := mustSend(t, st, g.ID, owner, "before you came")
	mustAdd(t, ctx, st, g.ID, owner, gone, "")
	ed := mustChange(t, st, edit(g.ID, owner, secret.Seq, "edited secret"))
	mustRemove(t, ctx, st, g.ID, gone, gone, "gone leaves")
	mustExec(t, ctx, pool, `ANALYZE message`)

	read := indexStat(t, url, "message_system_idx", "idx_tup_read", func(_ *store.Store, sess *store.Sessions) {
		got := sinceOne(t, ctx, sess, gone, chat.Range{ConversationID: g.ID, After: ed.Entry.Seq - 1, Until: ed.Entry.Seq})
		if len(got) != 1 || got[0].Kind != chat.KindEdit || !got[0].BodyHidden {
			t.Errorf("the former member catches up on %+v; want the edit without its body", got)
		}
	})
	if read > 10 {
		t.Errorf("the former member's catch-up read %d system entries, want at most 10", read)
	}
}
