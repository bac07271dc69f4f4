package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A history page reads the reactions of its own messages only, not every
// reaction of the conversation: in a group of 2,000 messages carrying 5
// reactions each, a page of 50 reads its 250 reactions. The statistics
// were taken before the group's reactions came, among 3,000 small
// conversations (a group that grew since autovacuum last analyzed the
// table), so every plan expects few reactions in the group: the plans the
// store makes for each call, and the generic plan a pool whose URL asks
// for plan caching settles on.
func TestAHistoryPageReadsOnlyTheReactionsOfItsMessages(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, st := storeAndURL(t)
	g := mustGroup(t, st, 1, 2)
	const messages, perMessage, limit = 2000, 5, 50
	mustExec(t, ctx, pool, `ALTER TABLE reaction SET (autovacuum_enabled = off)`)
	mustExec(t, ctx, pool, `
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no)
		SELECT $1, s, 1, gen_random_uuid(), 'message ' || s, s FROM generate_series(1, $2::int) s`, g.ID, messages)
	mustExec(t, ctx, pool, `UPDATE conversation SET last_seq = $2, message_count = $2, last_message_seq = $2 WHERE id = $1`, g.ID, messages)
	mustExec(t, ctx, pool, `
		WITH c AS (INSERT INTO conversation (type) SELECT 'GROUP' FROM generate_series(1, 3000) RETURNING id),
		m AS (INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no)
		      SELECT id, 1, 1, gen_random_uuid(), 'hi', 1 FROM c RETURNING conversation_id)
		INSERT INTO reaction (conversation_id, seq, user_id, emoji, appeared_seq)
		SELECT conversation_id, 1, u, '👍', 1 FROM m, generate_series(1, 3) u`)
	mustExec(t, ctx, pool, `ANALYZE`)
	mustExec(t, ctx, pool, `
		INSERT INTO reaction (conversation_id, seq, user_id, emoji, appeared_seq)
		SELECT $1, s, u, CASE WHEN u % 2 = 0 THEN '👍' ELSE '🎉' END, s FROM generate_series(1, $2::int) s, generate_series(1, $3::int) u`,
		g.ID, messages, perMessage)

	const pages = 8 // past the five custom plans after which a prepared statement may go generic
	for _, params := range []string{"", " plan_cache_mode=force_generic_plan"} {
		read := indexStat(t, url+params, "reaction_pkey", "idx_tup_read", func(st *store.Store, _ *store.Sessions) {
			before := int64(0)
			for range pages {
				page := mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 2, BeforeSeq: before, Limit: limit})
				if len(page) != limit {
					t.Fatalf("a page of %d entries, want %d", len(page), limit)
				}
				for _, m := range page {
					if len(m.Reactions) != 2 || m.Reactions[0].Count+m.Reactions[1].Count != perMessage {
						t.Fatalf("message %d has reactions %+v, want 👍 and 🎉, %d in all", m.Seq, m.Reactions, perMessage)
					}
				}
				before = page[0].Seq
			}
		})
		if want := int64(pages * limit * perMessage); read > want {
			t.Errorf("pool%s: %d history pages of %d messages read %d reactions, want at most %d (the %d of each of their messages), of the group's %d",
				params, pages, limit, read, want, perMessage, messages*perMessage)
		}
	}
}
