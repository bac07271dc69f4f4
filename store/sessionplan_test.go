package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// A connect opens its session (chat_session_open writes a cursor per
// conversation of the user) and loads its cursors. Both look up the user's
// conversations; planned from an unanalyzed table's guesses (a node just
// after a bulk import, or a burst of sign-ups faster than autovacuum) a
// join of them read every conversation of the node, a few milliseconds per
// connect at 10,000 conversations: connects at 1,000/s then took three
// cores of PostgreSQL.
func TestConnectLooksUpOnlyTheUsersConversationsOnAnUnanalyzedDatabase(t *testing.T) {
	tables := []string{"conversation", "conversation_member", "session_cursor", "chat_session"}
	_, pool := unanalyzedDB(t, tables...)
	// 10,000 direct conversations of two users each (users 1,000,000 and
	// up), each with some history.
	mustExec(t, testCtx(t), pool, `
		WITH c AS (INSERT INTO conversation (type, last_seq) SELECT 'DIRECT', 7 FROM generate_series(1, 10000) RETURNING id)
		INSERT INTO conversation_member (conversation_id, user_id)
		SELECT c.id, 1000000 + 2 * (c.id - (SELECT min(id) FROM c)) + u FROM c, generate_series(0, 1) AS u`)
	flushStats(t, pool)
	before := seqScanCounts(t, pool, tables)

	ss := store.NewSessions(pool)
	for u := int64(1000000); u < 1000040; u++ {
		client := fmt.Sprintf("phone-%d", u)
		if _, err := ss.Open(testCtx(t), client, "", u, true, true, time.Hour); err != nil {
			t.Fatalf("open the session of user %d: %v", u, err)
		}
		cursors, err := ss.Cursors(testCtx(t), client, u, true)
		if err != nil {
			t.Fatalf("load the cursors of user %d: %v", u, err)
		}
		if len(cursors) != 1 || cursors[0].Delivered != 7 || cursors[0].LastSeq != 7 || cursors[0].MemberCount != 2 {
			t.Fatalf("cursors of user %d: %+v, want one conversation delivered to 7 of 7 with 2 members", u, cursors)
		}
	}
	flushStats(t, pool)
	for _, tbl := range tables {
		if after := seqScans(t, pool, tbl); after != before[tbl] {
			t.Errorf("%d sequential scans of %s for 40 connects; a connect must look up the user's conversations by key", after-before[tbl], tbl)
		}
	}
}
