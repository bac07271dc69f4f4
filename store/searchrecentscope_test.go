package store_test

import (
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A word in most messages is listed by recency, newest first. For a user
// in 2,000 conversations, a page reads the newest messages of the most
// recently active conversations until it is found, not a page of each of
// the 2,000 (42,000 messages), and it is the page a walk of them all
// gives: the newest hits overall, a conversation of no known last
// activity included.
func TestACommonWordsPageReadsTheMostRecentlyActiveConversationsNotEveryOne(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, _ := storeAndURL(t)
	mustExec(t, ctx, pool, `
		WITH c AS (INSERT INTO conversation (type, title, history_visible) SELECT 'GROUP', 'g', 'all' FROM generate_series(1, 2000) RETURNING id)
		INSERT INTO conversation_member (conversation_id, user_id, role)
		SELECT c.id, u, CASE WHEN u = 2 THEN 'owner' ELSE 'member' END FROM c, generate_series(1, 2) u`)
	// Activity is not in the order of the ids; the last conversation's
	// messages, the newest of all, were never recorded as its activity.
	mustExec(t, ctx, pool, `
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no, created_at)
		SELECT c.id, i, 2, gen_random_uuid(), 'hello there ' || i, i,
		       now() - interval '1 day' + ((c.id * 7919) % 2000) * interval '1 second' + i * interval '1 ms'
		            + CASE WHEN c.id = (SELECT max(id) FROM conversation) THEN interval '1 day' ELSE interval '0' END
		FROM conversation c, generate_series(1, 25) i`)
	mustExec(t, ctx, pool, `
		UPDATE conversation c SET last_seq = 25, message_count = 25, last_message_seq = 25, last_message_at = m.at
		FROM (SELECT conversation_id, max(created_at) AS at FROM message GROUP BY 1) m
		WHERE c.id = m.conversation_id AND c.id < (SELECT max(id) FROM conversation)`)
	mustExec(t, ctx, pool, `UPDATE conversation SET last_seq = 25, message_count = 25 WHERE last_message_at IS NULL`)
	mustExec(t, ctx, pool, `ANALYZE`)
	want := func(offset int) []chat.MessageRef {
		rows, err := pool.Query(ctx, `SELECT conversation_id, seq FROM message ORDER BY created_at DESC, conversation_id DESC, seq DESC OFFSET $1 LIMIT 20`, offset)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []chat.MessageRef
		for rows.Next() {
			var r chat.MessageRef
			if err := rows.Scan(&r.ConversationID, &r.Seq); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	terms, err := chat.ParseSearchTerms("hello")
	if err != nil {
		t.Fatal(err)
	}
	read := indexStat(t, url, "message_pkey", "idx_tup_read", func(st *store.Store, _ *store.Sessions) {
		cursor := ""
		for page := range 2 {
			got, err := st.Search(ctx, chat.SearchQuery{UserID: 1, Text: "hello", Terms: terms, Limit: 20, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			var refs []chat.MessageRef
			for _, h := range got.Results {
				refs = append(refs, chat.MessageRef{ConversationID: h.ConversationID, Seq: h.Seq})
			}
			if w := want(20 * page); !slices.Equal(refs, w) {
				t.Errorf("page %d: %v; want the newest hits %v", page+1, refs, w)
			}
			cursor = got.NextCursor
		}
	})
	if read > 10000 {
		t.Errorf("two pages of a common word read %d messages of 2,000 conversations; want those of the most recently active few", read)
	}
}
