package store

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// DeliveredBatchSQL lets tests hold a delivered-watermark flush's
// statement open in a transaction of their own.
const DeliveredBatchSQL = deliveredBatchSQL

// LockMembersSQL lets tests hold a read-receipt batch's member locks in a
// transaction of their own, partway through when another holds a row.
const LockMembersSQL = lockMembersSQL

// SearchByScan is the plan Search picks for text and a caller who sees
// visible messages: true for the direct scan, false for the indexes.
func (s *Store) SearchByScan(ctx context.Context, terms []chat.SearchTerm, visible int64) (scan bool, err error) {
	err = s.runTx(ctx, "search plan", readOnly(), func(tx pgx.Tx) error {
		scan = s.searchByScan(ctx, tx, terms, visible)
		return nil
	})
	return scan, err
}

// SetWatchCheck makes Watch check its connection after d without a
// notice, and give it d to answer; before Watch starts.
func (s *Sessions) SetWatchCheck(d time.Duration) { s.watchCheck = d }

// PresenceStartedSQL is the statement a join reads who may now see whose
// presence by ($1 conversation, $2 the joined users, $3
// CHAT_LARGE_GROUP), and PresenceStartedByJoinSQL the one it ran before,
// which joined each conversation's bits back to its rows: tests compare
// their answers.
var (
	PresenceStartedSQL       = presenceStartedSQL
	PresenceStartedByJoinSQL = strings.Replace(presenceStartedSQL, `cmask AS (
	SELECT x.u, count(*) OVER w AS k, bit_or(set_bit(repeat('0', x.size)::varbit, x.i, 1)) OVER w AS bits
	FROM x WINDOW w AS (PARTITION BY x.c)
),
umask AS (
	SELECT cmask.u, bit_or(cmask.bits) AS bits FROM cmask WHERE cmask.k > 1 GROUP BY cmask.u
),`, `cmask AS (
	SELECT x.c, bit_or(set_bit(repeat('0', x.size)::varbit, x.i, 1)) AS bits
	FROM x GROUP BY x.c HAVING count(*) > 1
),
umask AS (
	SELECT x.u, bit_or(cmask.bits) AS bits FROM x JOIN cmask ON cmask.c = x.c GROUP BY x.u
),`, 1)
)

// WatchingSQL is the statement Watching reads its pairs with; before
// sharedVia it read every pair given, with no conversation given too:
// tests compare Watching's answers with its answers on all of them.
var WatchingSQL = watchingSQL

// PresenceEndedSQL is the statement a removal reads whom it stops
// sharing presence with by ($1 conversation, $2 the removed user, $3
// CHAT_LARGE_GROUP), and PresenceEndedBySharersSQL the one it ran
// before, which read every small-conversation sharer of the removed
// user: tests compare their answers.
var (
	PresenceEndedSQL          = presenceEndedSQL
	PresenceEndedBySharersSQL = `
SELECT o.user_id, ` + blockedBySQL("o.user_id", "$2") + `, ` + blockedBySQL("$2", "o.user_id") + `
FROM conversation c
JOIN conversation_member o ON o.conversation_id = c.id
WHERE c.id = $1 AND c.member_count < $3
  AND NOT EXISTS (SELECT 1 FROM user_settings h WHERE h.user_id IN ($2, o.user_id) AND NOT h.presence)
  AND NOT EXISTS (SELECT 1 FROM (` + smallSharersSQL("shm.user_id = $2", "$3") + `) x WHERE x.sharer = o.user_id)
ORDER BY o.user_id`
)
