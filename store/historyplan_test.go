package store_test

import (
	"fmt"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// What a history page reads besides its entries (their reactions, the
// messages their replies quote) belongs to the page, not to the whole
// conversation: each test reads pages of a group whose messages
// (and what it adds to them) came after the tables were last analyzed,
// among 3,000 small conversations, so every plan expects next to nothing
// in the group: the plans the store makes for each call, and the generic
// plan a pool whose URL asks for plan caching settles on.
const (
	staleMessages = 2000
	pageLimit     = 50
	pagesRead     = 8 // past the five custom plans after which a prepared statement may go generic
)

// staleGroup is a group of staleMessages messages, every third a reply to
// the one two before it, written after the last ANALYZE, with autovacuum
// off for the tables named; fill adds the rest of the group's rows.
func staleGroup(t *testing.T, fill string, tables ...string) (url string, g chat.Conversation) {
	t.Helper()
	ctx := testCtx(t)
	url, pool, st := storeAndURL(t)
	g = mustGroup(t, st, 1, 2)
	for _, tbl := range append([]string{"message"}, tables...) {
		mustExec(t, ctx, pool, "ALTER TABLE "+tbl+" SET (autovacuum_enabled = off)")
	}
	mustExec(t, ctx, pool, `
		WITH c AS (INSERT INTO conversation (type) SELECT 'GROUP' FROM generate_series(1, 3000) RETURNING id),
		m AS (INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no)
		      SELECT id, 1, 1, gen_random_uuid(), 'hi', 1 FROM c RETURNING conversation_id)
		INSERT INTO reaction (conversation_id, seq, user_id, emoji, appeared_seq)
		SELECT conversation_id, 1, u, '👍', 1 FROM m, generate_series(1, 3) u`)
	mustExec(t, ctx, pool, `ANALYZE`)
	mustExec(t, ctx, pool, `
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no, reply_to)
		SELECT $1, s, 1, gen_random_uuid(), 'message ' || s, s, CASE WHEN s % 3 = 0 THEN s - 2 END
		FROM generate_series(1, $2::int) s`, g.ID, staleMessages)
	mustExec(t, ctx, pool, `UPDATE conversation SET last_seq = $2, message_count = $2, last_message_seq = $2 WHERE id = $1`, g.ID, staleMessages)
	if fill != "" {
		mustExec(t, ctx, pool, fill, g.ID, staleMessages)
	}
	return url, g
}

// readPages is how much reading pagesRead pages of g's history, newest
// first, added to stat of index, for a pool with each of the URL
// parameters given; check looks at each page.
func readPages(t *testing.T, url string, g chat.Conversation, index, stat string, check func(page []chat.Message)) map[string]int64 {
	t.Helper()
	read := map[string]int64{}
	for _, params := range []string{"", " plan_cache_mode=force_generic_plan"} {
		read["pool"+params] = indexStat(t, url+params, index, stat, func(st *store.Store, _ *store.Sessions) {
			before := int64(0)
			for range pagesRead {
				page := mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 2, BeforeSeq: before, Limit: pageLimit})
				if len(page) != pageLimit {
					t.Fatalf("a page of %d entries, want %d", len(page), pageLimit)
				}
				check(page)
				before = page[0].Seq
			}
		})
	}
	return read
}

// In a group of 2,000 messages carrying 5 reactions each, a page of 50
// reads its 250 reactions.
func TestAHistoryPageReadsOnlyTheReactionsOfItsMessages(t *testing.T) {
	t.Parallel()
	const perMessage = 5
	url, g := staleGroup(t, `
		INSERT INTO reaction (conversation_id, seq, user_id, emoji, appeared_seq)
		SELECT $1, s, u, CASE WHEN u % 2 = 0 THEN '👍' ELSE '🎉' END, s FROM generate_series(1, $2::int) s, generate_series(1, 5) u`,
		"reaction")
	read := readPages(t, url, g, "reaction_pkey", "idx_tup_read", func(page []chat.Message) {
		for _, m := range page {
			if len(m.Reactions) != 2 || m.Reactions[0].Count+m.Reactions[1].Count != perMessage {
				t.Fatalf("message %d has reactions %+v, want 👍 and 🎉, %d in all", m.Seq, m.Reactions, perMessage)
			}
		}
	})
	for pool, n := range read {
		if want := int64(pagesRead * pageLimit * perMessage); n > want {
			t.Errorf("%s: %d history pages of %d messages read %d reactions, want at most %d (the %d of each of their messages), of the group's %d",
				pool, pagesRead, pageLimit, n, want, perMessage, staleMessages*perMessage)
		}
	}
}

// A page of 50 reads its 50 messages and, for each of its replies, the
// message it quotes: at most 100 messages; a catch-up likewise.
func TestAHistoryPageReadsOnlyTheMessagesItsRepliesQuote(t *testing.T) {
	t.Parallel()
	url, g := staleGroup(t, "")
	read := readPages(t, url, g, "message_pkey", "idx_tup_read", func(page []chat.Message) {
		for _, m := range page {
			if (m.ReplyTo != nil) != (m.Seq%3 == 0) || m.ReplyTo != nil && m.ReplyTo.Snippet != fmt.Sprintf("message %d", m.Seq-2) {
				t.Fatalf("message %d quotes %+v, want message %d when its seq is a multiple of 3", m.Seq, m.ReplyTo, m.Seq-2)
			}
		}
	})
	// A catch-up of the last 100 entries reads the same way.
	read["catch-up"] = indexStat(t, url, "message_pkey", "idx_tup_read", func(_ *store.Store, sess *store.Sessions) {
		for range pagesRead / 2 {
			if got := sinceOne(t, testCtx(t), sess, 2, chat.Range{ConversationID: g.ID, After: staleMessages - 2*pageLimit}); len(got) != 2*pageLimit {
				t.Fatalf("a catch-up of %d entries, want %d", len(got), 2*pageLimit)
			}
		}
	})
	for pool, n := range read {
		if want := int64(pagesRead * 2 * pageLimit); n > want {
			t.Errorf("%s: reading %d entries read %d messages, want at most %d (the entries and those their replies quote), of the group's %d",
				pool, pagesRead*pageLimit, n, want, staleMessages)
		}
	}
}
