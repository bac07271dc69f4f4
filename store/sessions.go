package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/coalesce"
)

// Sessions stores MQTT chat sessions and their per-conversation delivered
// cursors. A cursor is the highest seq the session's client acknowledged;
// replay after a reconnect starts right after it. Cursors may lag behind
// what was delivered (they are flushed in batches), which only causes
// duplicates with the same (conversationId, seq), never a loss.
//
// Writes that many connections make at once (subscriptions before each
// SUBACK, the last-seen time at each disconnect) are group-committed:
// those waiting together share one statement, and each caller returns once
// its own row is written.
type Sessions struct {
	pool    *pgxpool.Pool
	subs    *coalesce.Group[connKey, []byte]
	touches *coalesce.Group[connKey, int64]
	// watchCheck replaces Watch's watchCheck when set (tests).
	watchCheck time.Duration
}

// connKey is a session as one connection holds it: touches and recorded
// subscriptions wait together by connection, so that an old connection's
// write for a client id cannot take the place of the current one's in a
// batch.
type connKey struct{ clientID, token string }

// NewSessions returns the session store on pool.
func NewSessions(pool *pgxpool.Pool) *Sessions {
	s := &Sessions{pool: pool}
	s.subs = coalesce.NewGroup(s.writeSubscriptions)
	s.touches = coalesce.NewGroup(s.writeTouches)
	return s
}

var (
	_ chat.DeliveryStore = (*Sessions)(nil)
	_ chat.SessionStore  = (*Sessions)(nil)
)

// Open claims clientID for userID and prepares its cursors. A clientID
// already owned by another user is refused with chat.ErrClientIDTaken. A
// persistent session that is resumed (not clean, its expiry not run out)
// keeps its stored cursors (Resumed) and returns its recorded
// subscriptions (Present when there is a record). Any other session loses
// its cursors and recorded subscriptions: a persistent one gets a cursor
// at every conversation's current last_seq (the client starts "now"), a
// non-persistent one none (its cursors are deleted; delivery starts from
// what is live). The session is token's, the opening
// connection's, from then on: only it may Drop or Touch it.
func (s *Sessions) Open(ctx context.Context, clientID, token string, userID int64, persistent, clean bool, expiry time.Duration) (chat.OpenedSession, error) {
	var (
		owner   int64
		resumed bool
		subs    []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT * FROM chat_session_open($1, $2, $3, $4, $5, $6)`,
		clientID, userID, persistent, clean, int64(expiry/time.Second), token).Scan(&owner, &resumed, &subs)
	if err != nil {
		return chat.OpenedSession{}, classify("open session", err)
	}
	if owner != userID {
		return chat.OpenedSession{}, chat.ErrClientIDTaken
	}
	out := chat.OpenedSession{Resumed: resumed}
	if resumed && subs != nil {
		if err := json.Unmarshal(subs, &out.Subscriptions); err != nil {
			return chat.OpenedSession{}, fmt.Errorf("read session subscriptions: %w", err)
		}
		out.Present = true
	}
	return out, nil
}

// SaveSubscriptions records a persistent session's subscriptions, all of
// them (the broker's view after a SUBSCRIBE or UNSUBSCRIBE), unless a
// connection other than token's opened the session since: an old
// connection still open on another node after its device reconnected
// elsewhere speaks for itself, not for the session.
func (s *Sessions) SaveSubscriptions(ctx context.Context, clientID, token string, subs []chat.Subscription) error {
	if subs == nil {
		subs = []chat.Subscription{}
	}
	b, err := json.Marshal(subs)
	if err != nil {
		return fmt.Errorf("encode subscriptions: %w", err)
	}
	return s.subs.Do(ctx, connKey{clientID, token}, b)
}

// lockSessionsInOrder locks the sessions of a batch (CTE v) in client id
// order: two batches that share sessions (subscriptions and disconnects
// of the same clients) then wait for each other instead of deadlocking.
const lockSessionsInOrder = `SELECT s.client_id FROM chat_session s JOIN v ON s.client_id = v.id
	ORDER BY s.client_id FOR NO KEY UPDATE OF s`

// writeSubscriptions records the subscriptions of many sessions in one
// statement (the Group's batch: those that waited together).
func (s *Sessions) writeSubscriptions(ctx context.Context, batch map[connKey][]byte) error {
	ids := make([]string, 0, len(batch))
	tokens := make([]string, 0, len(batch))
	docs := make([]string, 0, len(batch))
	for k, b := range batch {
		ids = append(ids, k.clientID)
		tokens = append(tokens, k.token)
		docs = append(docs, string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `WITH v AS (SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[]) AS v(id, token, subs)),
		locked AS (`+lockSessionsInOrder+`)
		UPDATE chat_session s SET subscriptions = v.subs FROM v JOIN locked l ON l.client_id = v.id
		WHERE s.client_id = v.id AND s.conn_token = v.token AND s.persistent`, ids, tokens, docs); err != nil {
		return classify("save subscriptions", err)
	}
	return nil
}

// Cursors returns, for every conversation userID belongs to, the session's
// delivered cursor (the stored one, else the member's join_seq: the
// conversation was joined after the session started; never below join_seq,
// so a member who left and came back is not replayed what happened while
// they were away) and the conversation's
// last_seq. For a session without stored state (non-persistent) pass
// stored=false: the cursor is then last_seq, i.e. nothing to replay.
//
// With stored state it also returns each conversation the user left whose
// entries up to the leave (the cursor's end_seq, oweUntilLeave) the
// session has not all acknowledged, with End set: a session that was
// offline when its user left gets what was committed before the leave.
// A member added back after such a leave (join_seq at or past end_seq)
// has End set too, with the stored cursor as Delivered: the session
// finishes what the old membership owed, then goes on after JoinSeq.
// Memberships that followed it and ended too while the session still
// owed it (owed_joins, owed_ends) come as Rejoins, each delivered in turn.
func (s *Sessions) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	// Every row by key (LATERAL ... LIMIT 1), whatever the statistics say:
	// planned from an unanalyzed table's guesses, a join read every
	// conversation of the node at every connect.
	q := `SELECT m.conversation_id,
			CASE WHEN NOT $3 THEN c.last_seq WHEN t.tail THEN sc.delivered_seq ELSE GREATEST(COALESCE(sc.delivered_seq, 0), m.join_seq) END,
			c.last_seq, m.join_seq, c.member_count,
			CASE WHEN $3 AND t.tail THEN sc.end_seq ELSE 0 END,
			CASE WHEN $3 AND t.tail THEN sc.owed_joins END, CASE WHEN $3 AND t.tail THEN sc.owed_ends END
		FROM conversation_member m
		CROSS JOIN LATERAL (SELECT cv.last_seq, cv.member_count FROM conversation cv WHERE cv.id = m.conversation_id LIMIT 1) c
		LEFT JOIN LATERAL (SELECT s.delivered_seq, s.end_seq, s.owed_joins, s.owed_ends FROM session_cursor s
		                   WHERE s.client_id = $1 AND s.conversation_id = m.conversation_id LIMIT 1) sc ON true
		CROSS JOIN LATERAL (SELECT COALESCE(chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends)
		                                    AND sc.end_seq <= m.join_seq, false) AS tail) t
		WHERE m.user_id = $2
		UNION ALL
		SELECT sc.conversation_id, sc.delivered_seq, c.last_seq, 0, c.member_count, sc.end_seq,
			sc.owed_joins, sc.owed_ends
		FROM session_cursor sc
		CROSS JOIN LATERAL (SELECT cv.last_seq, cv.member_count FROM conversation cv WHERE cv.id = sc.conversation_id LIMIT 1) c
		WHERE $3 AND sc.client_id = $1 AND chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends)
		  AND NOT EXISTS (SELECT 1 FROM conversation_member m WHERE m.conversation_id = sc.conversation_id AND m.user_id = $2)`
	rows, err := s.pool.Query(ctx, q, clientID, userID, stored)
	if err != nil {
		return nil, classify("load cursors", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chat.ConvCursor, error) {
		var (
			c           chat.ConvCursor
			joins, ends []int64
		)
		if err := r.Scan(&c.ConversationID, &c.Delivered, &c.LastSeq, &c.JoinSeq, &c.MemberCount, &c.End, &joins, &ends); err != nil {
			return c, err
		}
		if c.End > 0 {
			owedFrom(&c, joins, ends)
		}
		return c, nil
	})
	if err != nil {
		return nil, classify("load cursors", err)
	}
	return out, nil
}

// owedFrom sets c's End and Rejoins from a stored cursor that owes
// entries of past memberships: the one ending at c.End, then those of
// joins and ends (pairwise, oldest first). The memberships the delivered
// cursor has passed are dropped, and the cursor starts no earlier than the
// first one left: nothing between a leave and the next join is owed.
func owedFrom(c *chat.ConvCursor, joins, ends []int64) {
	spans := make([]chat.Span, 0, 1+len(joins))
	spans = append(spans, chat.Span{Join: c.Delivered, End: c.End})
	for i := range min(len(joins), len(ends)) {
		spans = append(spans, chat.Span{Join: joins[i], End: ends[i]})
	}
	for len(spans) > 1 && spans[0].End <= c.Delivered {
		spans = spans[1:]
	}
	c.Delivered, c.End = max(c.Delivered, spans[0].Join), spans[0].End
	if len(spans) > 1 {
		c.Rejoins = spans[1:]
	}
}

// oweUntilLeave records, in the transaction of a leave, that each of the
// user's persistent sessions is owed the conversation's entries up to
// lastSeq (the last one committed before the leave) and none before
// joinSeq (those of an earlier membership): the session cursor's end_seq.
// A connected session learns it from member.removed as well; one that is
// offline reads it on reconnect (Cursors) and catches up to it. A session
// still owed entries of an earlier membership (the user was removed,
// added back and removed again while it was behind) keeps them: this
// membership is appended to owed_joins and owed_ends, and the session
// gets each membership's entries in turn.
//
// The sessions are locked first (FOR KEY SHARE, in client id order, an
// InitPlan run before the first cursor row is written), then their cursor
// rows in key order: the order of SaveCursors and of opening, dropping and
// expiring a session, so none of them deadlocks with a leave.
func oweUntilLeave(ctx context.Context, tx pgx.Tx, conversationID, userID, joinSeq, lastSeq int64) error {
	if lastSeq <= joinSeq {
		return nil // nothing was committed while they were a member
	}
	_, err := tx.Exec(ctx, `INSERT INTO session_cursor AS sc (client_id, conversation_id, delivered_seq, end_seq)
		SELECT u.client_id, $2, $3, $4
		FROM unnest(ARRAY(SELECT s.client_id FROM chat_session s WHERE s.user_id = $1 AND s.persistent
		                  ORDER BY s.client_id FOR KEY SHARE)) AS u(client_id)
		ORDER BY 1
		ON CONFLICT (client_id, conversation_id) DO UPDATE SET
			delivered_seq = CASE WHEN chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends) THEN sc.delivered_seq
			                     ELSE GREATEST(sc.delivered_seq, EXCLUDED.delivered_seq) END,
			end_seq = CASE WHEN chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends) THEN sc.end_seq
			               ELSE EXCLUDED.end_seq END,
			owed_joins = CASE WHEN chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends) THEN sc.owed_joins || EXCLUDED.delivered_seq
			                  ELSE '{}' END,
			owed_ends = CASE WHEN chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends) THEN sc.owed_ends || EXCLUDED.end_seq
			                 ELSE '{}' END`,
		userID, conversationID, joinSeq, lastSeq)
	if err != nil {
		return fmt.Errorf("record what sessions are owed before the leave: %w", err)
	}
	return nil
}

// SinceMany is Since for many conversations in one round trip: up to
// perConv entries after each range's seq (messages as they are now, and
// their edits, recalls and reactions), grouped by conversation in seq
// order, as userID may read them: what an entry carries of a message
// before their history floor is hidden as history hides it
// (chat.HideBeforeFloor), and a reply to such a message quotes it as the
// reply was sent (quotedJoin). A session catching up on dozens of
// conversations costs one query, not dozens, which matters most when the
// server is busiest.
//
// A range with Until (a conversation the user left: their stream is
// finishing what they were owed) ends there. One without ends where the
// user's membership does: it gets nothing unless they are a member whose
// join_seq is at most its After. A session's word that the user is a
// member can be older than what PostgreSQL holds when the query runs (their
// member.removed, or a removal and a re-add, committed but not routed to
// the session yet): what was committed after the leave, or while they were
// away, is not theirs. The session learns the leave, with the last seq
// they are owed, and asks again with Until. A range with Until reads its
// messages, and what its replies quote, as they were at the leave
// (chat_message_at): an edit committed after it must not reach them
// through the message it rewrote.
//
// A range with Until reads with the history floor the user had at the
// leave (endedFloorSQL): their join and the group's history visibility
// then, whatever their member row, and the group, say now.
func (s *Sessions) SinceMany(ctx context.Context, userID int64, ranges []chat.Range, perConv int) (map[int64][]chat.Message, error) {
	convs := make([]int64, len(ranges))
	afters := make([]int64, len(ranges))
	untils := make([]int64, len(ranges))
	for i, r := range ranges {
		convs[i], afters[i], untils[i] = r.ConversationID, r.After, r.Until
	}
	// Every row by key (LATERAL ... LIMIT 1), as in Cursors. A range
	// with Until reads its messages, and what its replies quote, as they
	// were at the leave (chat_message_at; left: a member's are as now);
	// a reply to a message the floor hides the edits of quotes it as it
	// was at the reply (quotedJoin). OFFSET 0 keeps left_msg's WHERE a
	// one-time filter, as quotedJoin's: a member's entries (r.u = 0) skip
	// chat_message_at's lookups instead of filtering what they found.
	rows, err := s.pool.Query(ctx, `SELECT `+sinceManyColumns+`, f.floor
		FROM unnest($1::bigint[], $2::bigint[], $5::bigint[]) AS r(c, a, u)
		CROSS JOIN LATERAL (SELECT COALESCE(CASE WHEN r.u > 0 THEN `+endedFloorSQL+` ELSE `+floorSQL+` END, 9223372036854775807) AS floor,
		                           CASE WHEN r.u > 0 THEN r.u WHEN m.join_seq <= r.a THEN 9223372036854775807 ELSE r.a END AS upto
		                    FROM conversation c
		                    LEFT JOIN conversation_member m ON m.conversation_id = c.id AND m.user_id = $4
		                    WHERE c.id = r.c LIMIT 1) f
		CROSS JOIN LATERAL (SELECT * FROM chat_entry WHERE conversation_id = r.c AND seq > r.a AND seq <= f.upto ORDER BY seq LIMIT $3) e
		LEFT JOIN LATERAL (SELECT * FROM chat_message_at(e.conversation_id, e.seq, r.u)
		                   WHERE r.u > 0 AND e.kind = 'message' AND e.edited_at IS NOT NULL OFFSET 0) left_msg ON true
		`+quotedJoin("f.floor", "r.u")+`
		ORDER BY e.conversation_id, e.seq`, convs, afters, perConv, userID, untils)
	if err != nil {
		return nil, classify("read messages", err)
	}
	floors := make(map[int64]int64, len(ranges))
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chat.Message, error) {
		var floor int64
		m, err := scanEntryAnd(r, &floor)
		floors[m.ConversationID] = floor
		return m, err
	})
	if err != nil {
		return nil, classify("read messages", err)
	}
	out := make(map[int64][]chat.Message, len(ranges))
	for _, m := range entries {
		out[m.ConversationID] = append(out[m.ConversationID], m)
	}
	for conv, ms := range out {
		chat.HideBeforeFloor(ms, floors[conv])
	}
	return out, nil
}

// endedFloorSQL is the history floor (floorSQL) of user $4's membership
// of conversation c that ended at the range's Until (r.u), for SinceMany,
// as it was at that leave: a former member's view is frozen there. Their
// join_seq then, which their member.added entry, the first entry after
// it, still tells (none: a first member, 0), not their current member
// row's: they have none after a leave, or a later join's after a re-add,
// and either hid the edits they were owed as of a floor they did not have
// while they were a member. And the group's history visibility then
// (visibleAtSQL), not now: a group opened to "all" after the leave must
// not give them the edit bodies it hid from them while they were in it.
// The join is read among the member.added entries naming them
// (message_member_added_idx, whose predicate is the LIKE and whose key is
// the userId), not by walking every system entry back from the leave.
var endedFloorSQL = `CASE WHEN c.type = 'GROUP' AND ` + visibleAtSQL + ` = 'joined' THEN COALESCE(
	(SELECT x.seq - 1 FROM message x
	 WHERE x.conversation_id = c.id AND x.kind = 'system' AND x.body LIKE '%"action":"member.added"%'
	   AND (x.body::jsonb ->> 'userId')::bigint = $4::bigint AND x.seq <= r.u
	 ORDER BY x.seq DESC LIMIT 1), 0) ELSE 0 END`

// visibleAtSQL is group c's history visibility when entry r.u was its
// newest. A change of it is a group.updated entry carrying the new value
// (UpdateGroup writes one only when the value changes), so it is the value
// of the last such entry up to r.u; with none, the value the first one
// after r.u changed (the other of the two); with none either, the value
// now. Both reads walk only the entries that name historyVisible
// (message_visibility_idx, whose predicate is the LIKE), not every
// membership and settings entry of the group.
const visibleAtSQL = `COALESCE(
	(SELECT x.body::jsonb ->> 'historyVisible' FROM message x
	 WHERE x.conversation_id = c.id AND x.kind = 'system' AND x.body LIKE '%"historyVisible"%' AND x.seq <= r.u
	   AND x.body::jsonb @> '{"action": "group.updated"}' AND x.body::jsonb ? 'historyVisible'
	 ORDER BY x.seq DESC LIMIT 1),
	(SELECT CASE x.body::jsonb ->> 'historyVisible' WHEN 'joined' THEN 'all' ELSE 'joined' END FROM message x
	 WHERE x.conversation_id = c.id AND x.kind = 'system' AND x.body LIKE '%"historyVisible"%' AND x.seq > r.u
	   AND x.body::jsonb @> '{"action": "group.updated"}' AND x.body::jsonb ? 'historyVisible'
	 ORDER BY x.seq LIMIT 1),
	c.history_visible)`

// sinceManyColumns are entryColumns of SinceMany's entries e, with a
// message's body and edited time as they were at the leave in a range with
// Until (left_msg), and a reply's snippet as the reader may read it
// (quotedJoin).
var sinceManyColumns = prefixedExcept("e", entryColumns, map[string]string{
	"body":          "COALESCE(left_msg.body, e.body)",
	"edited_at":     "CASE WHEN left_msg.body IS NULL THEN e.edited_at ELSE left_msg.edited_at END",
	"reply_snippet": quotedColumn,
})

// SaveCursors upserts delivered cursors in one statement; a cursor never
// moves backwards. Rows of sessions that no longer exist are skipped. A
// cursor of a conversation the session's user is not a member of only
// moves a row that exists (one still finishing what a leave owed): the
// flush of a session that has ended can come after the resumed session
// deleted that row, its work done, and must not bring it back.
//
// The sessions are locked first (FOR KEY SHARE, in client id order: s),
// then the cursor rows that exist (c, which reads s), in key order, in an
// InitPlan of u that runs to the end before the first cursor row is
// written: a session, then its cursors in key order, the order in which
// opening, dropping and expiring a session and a leave lock them. The
// UPDATE and the upsert then write rows this statement holds, or insert
// new ones in key order; left to lock rows as their plan meets them (a
// hash join meets them in heap order, which an update changes), two
// flushes of one session could deadlock. Left to the foreign key
// check, the KEY SHARE came after the upsert held an existing cursor row,
// and a clean reopen (or drop, or expiry) of the session, holding the
// session while deleting its cursors, deadlocked with the flush. A session
// deleted meanwhile is not returned by the lock, and its rows are skipped.
func (s *Sessions) SaveCursors(ctx context.Context, cs []chat.Cursor) error {
	if len(cs) == 0 {
		return nil
	}
	ids := make([]string, len(cs))
	convs := make([]int64, len(cs))
	seqs := make([]int64, len(cs))
	for i, c := range cs {
		ids[i], convs[i], seqs[i] = c.ClientID, c.ConversationID, c.Seq
	}
	// A row the UPDATE finds deleted meanwhile (the resume, concurrently)
	// stays deleted; an INSERT would write it again.
	_, err := s.pool.Exec(ctx, `WITH s AS MATERIALIZED (
			SELECT s.client_id FROM chat_session s WHERE s.client_id = ANY($1::text[])
			ORDER BY s.client_id FOR KEY SHARE),
		c AS MATERIALIZED (
			SELECT count(*) AS n FROM (
				SELECT 1 FROM session_cursor sc
				WHERE sc.client_id IN (SELECT client_id FROM s)
				  AND (sc.client_id, sc.conversation_id) IN (SELECT * FROM unnest($1::text[], $2::bigint[]))
				ORDER BY sc.client_id, sc.conversation_id FOR NO KEY UPDATE OF sc) l),
		u AS (
			SELECT u.client_id, u.conversation_id, max(u.seq) AS seq,
				EXISTS (SELECT 1 FROM chat_session s JOIN conversation_member m ON m.user_id = s.user_id
				        WHERE s.client_id = u.client_id AND m.conversation_id = u.conversation_id) AS member
			FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(client_id, conversation_id, seq)
			WHERE (SELECT n FROM c) >= 0 AND u.client_id IN (SELECT client_id FROM s)
			GROUP BY u.client_id, u.conversation_id),
		left_conv AS (
			UPDATE session_cursor sc SET delivered_seq = GREATEST(sc.delivered_seq, u.seq)
			FROM u WHERE NOT u.member AND sc.client_id = u.client_id AND sc.conversation_id = u.conversation_id)
		INSERT INTO session_cursor (client_id, conversation_id, delivered_seq)
		SELECT client_id, conversation_id, seq FROM u WHERE member
		ORDER BY 1, 2
		ON CONFLICT (client_id, conversation_id)
		DO UPDATE SET delivered_seq = GREATEST(session_cursor.delivered_seq, EXCLUDED.delivered_seq)`, ids, convs, seqs)
	if err != nil {
		return classify("save cursors", err)
	}
	return nil
}

// Touch records that a session was seen now (on disconnect), which starts
// its expiry clock, and its expiry (a v5 client may change it on
// DISCONNECT), unless a connection other than token's opened it since.
func (s *Sessions) Touch(ctx context.Context, clientID, token string, expiry time.Duration) error {
	return s.touches.Do(ctx, connKey{clientID, token}, int64(expiry/time.Second))
}

// writeTouches records many disconnects in one statement.
func (s *Sessions) writeTouches(ctx context.Context, batch map[connKey]int64) error {
	ids := make([]string, 0, len(batch))
	tokens := make([]string, 0, len(batch))
	secs := make([]int64, 0, len(batch))
	for k, e := range batch {
		ids = append(ids, k.clientID)
		tokens = append(tokens, k.token)
		secs = append(secs, e)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `SELECT chat_sessions_touch($1, $2, $3)`, ids, tokens, secs); err != nil {
		return classify("touch sessions", err)
	}
	return nil
}

// Drop deletes a session and its cursors (clean session ended), unless a
// connection other than token's opened it since (the client reconnected,
// here or on another node, before this connection ended).
func (s *Sessions) Drop(ctx context.Context, clientID, token string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM chat_session WHERE client_id = $1 AND conn_token = $2`, clientID, token); err != nil {
		return classify("drop session", err)
	}
	return nil
}

// Expire deletes sessions whose expiry passed while offline. A session is
// never expired while connected: online holds the client ids connected to
// this node, and a session another node holds (node_id set, that node's
// heartbeat younger than five minutes) is left to that node.
func (s *Sessions) Expire(ctx context.Context, online []string) (int64, error) {
	// A session being written right now (a client coming back) is
	// skipped, not waited for: it is not expiring.
	tag, err := s.pool.Exec(ctx, `DELETE FROM chat_session WHERE client_id IN (
		SELECT s.client_id FROM chat_session s WHERE
		s.last_seen_at + make_interval(secs => CASE WHEN s.persistent THEN s.expiry_seconds ELSE 3600 END) < now()
		AND NOT (s.client_id = ANY(COALESCE($1::text[], '{}')))
		AND NOT EXISTS (SELECT 1 FROM chat_node n WHERE n.node_id = s.node_id AND n.heartbeat_at > now() - interval '5 minutes')
		ORDER BY s.client_id FOR UPDATE SKIP LOCKED)`, online)
	if err != nil {
		return 0, classify("expire sessions", err)
	}
	return tag.RowsAffected(), nil
}

// Members lists the members of a conversation, ascending, with their
// history floors (delivery routing).
func (s *Sessions) Members(ctx context.Context, conversationID int64) (chat.Routing, error) {
	// c.last_seq in the same snapshot as the members: the membership
	// events before it are in them (Routing.Seq).
	rows, err := s.pool.Query(ctx, `SELECT m.user_id, `+floorSQL+`, c.last_seq
		FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
		WHERE m.conversation_id = $1 ORDER BY m.user_id`, conversationID)
	if err != nil {
		return chat.Routing{}, classify("members", err)
	}
	r := chat.Routing{Members: []int64{}}
	var floors []int64
	var user, floor int64
	if _, err := pgx.ForEachRow(rows, []any{&user, &floor, &r.Seq}, func() error {
		r.Members = append(r.Members, user)
		floors = append(floors, floor)
		return nil
	}); err != nil {
		return chat.Routing{}, classify("members", err)
	}
	if slices.ContainsFunc(floors, func(f int64) bool { return f > 0 }) {
		r.Floors = floors
	}
	return r, nil
}

// MaxOfflineSessions is how many persistent sessions with no connection
// one user keeps: opening a new persistent session forgets the user's
// least recently seen offline ones beyond it (chat_session_open).
const MaxOfflineSessions = 100
