package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// Sessions stores MQTT chat sessions and their per-conversation delivered
// cursors. A cursor is the highest seq the session's client acknowledged;
// replay after a reconnect starts right after it. Cursors may lag behind
// what was delivered (they are flushed in batches), which only causes
// duplicates with the same (conversationId, seq), never a loss.
type Sessions struct {
	pool *pgxpool.Pool
}

// NewSessions returns the session store on pool.
func NewSessions(pool *pgxpool.Pool) *Sessions { return &Sessions{pool: pool} }

var (
	_ chat.DeliveryStore = (*Sessions)(nil)
	_ chat.SessionStore  = (*Sessions)(nil)
)

// Open claims clientID for userID and prepares its cursors. A clientID
// already owned by another user is refused with chat.ErrClientIDTaken. When
// persistent is false, or clean is true, or the session is new, cursors are
// reset to every conversation's current last_seq (the client starts "now");
// otherwise the stored cursors are kept and Open reports resumed = true.
func (s *Sessions) Open(ctx context.Context, clientID string, userID int64, persistent, clean bool, expiry time.Duration) (resumed bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var owner int64
		var wasPersistent bool
		err := tx.QueryRow(ctx, `SELECT user_id, persistent FROM chat_session WHERE client_id = $1 FOR UPDATE`, clientID).Scan(&owner, &wasPersistent)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO chat_session (client_id, user_id, persistent, expiry_seconds)
				VALUES ($1, $2, $3, $4) ON CONFLICT (client_id) DO NOTHING`, clientID, userID, persistent, int64(expiry/time.Second)); err != nil {
				return fmt.Errorf("insert session: %w", err)
			}
			// A concurrent Open may have won the insert: re-read the owner.
			if err := tx.QueryRow(ctx, `SELECT user_id FROM chat_session WHERE client_id = $1 FOR UPDATE`, clientID).Scan(&owner); err != nil {
				return fmt.Errorf("read session: %w", err)
			}
			if owner != userID {
				return chat.ErrClientIDTaken
			}
		case err != nil:
			return fmt.Errorf("read session: %w", err)
		default:
			if owner != userID {
				return chat.ErrClientIDTaken
			}
			resumed = persistent && wasPersistent && !clean
			if _, err := tx.Exec(ctx, `UPDATE chat_session SET persistent = $2, expiry_seconds = $3, last_seen_at = now() WHERE client_id = $1`,
				clientID, persistent, int64(expiry/time.Second)); err != nil {
				return fmt.Errorf("update session: %w", err)
			}
		}
		if resumed {
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM session_cursor WHERE client_id = $1`, clientID); err != nil {
			return fmt.Errorf("reset cursors: %w", err)
		}
		if !persistent {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_cursor (client_id, conversation_id, delivered_seq)
			SELECT $1, c.id, c.last_seq FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
			WHERE m.user_id = $2`, clientID, userID); err != nil {
			return fmt.Errorf("init cursors: %w", err)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, chat.ErrClientIDTaken) {
			return false, chat.ErrClientIDTaken
		}
		return false, classify("open session", err)
	}
	return resumed, nil
}

// Cursors returns, for every conversation userID belongs to, the session's
// delivered cursor (the stored one, else the member's join_seq: the
// conversation was joined after the session started; never below join_seq,
// so a member who left and came back is not replayed what happened while
// they were away) and the conversation's
// last_seq. For a session without stored state (non-persistent) pass
// stored=false: the cursor is then last_seq, i.e. nothing to replay.
func (s *Sessions) Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]chat.ConvCursor, error) {
	q := `SELECT c.id, CASE WHEN $3 THEN GREATEST(COALESCE(sc.delivered_seq, 0), m.join_seq) ELSE c.last_seq END, c.last_seq,
			(SELECT count(*) FROM conversation_member mm WHERE mm.conversation_id = c.id)
		FROM conversation_member m
		JOIN conversation c ON c.id = m.conversation_id
		LEFT JOIN session_cursor sc ON sc.client_id = $1 AND sc.conversation_id = c.id
		WHERE m.user_id = $2`
	rows, err := s.pool.Query(ctx, q, clientID, userID, stored)
	if err != nil {
		return nil, classify("load cursors", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chat.ConvCursor, error) {
		var c chat.ConvCursor
		err := r.Scan(&c.ConversationID, &c.Delivered, &c.LastSeq, &c.MemberCount)
		return c, err
	})
	if err != nil {
		return nil, classify("load cursors", err)
	}
	return out, nil
}

// SinceMany is Since for many conversations in one round trip: up to
// perConv entries after each range's seq (messages as they are now, and
// their edits, recalls and reactions), grouped by conversation in seq
// order. A session catching up on dozens of conversations costs one query,
// not dozens, which matters most when the server is busiest.
func (s *Sessions) SinceMany(ctx context.Context, ranges []chat.Range, perConv int) (map[int64][]chat.Message, error) {
	convs := make([]int64, len(ranges))
	afters := make([]int64, len(ranges))
	for i, r := range ranges {
		convs[i], afters[i] = r.ConversationID, r.After
	}
	rows, err := s.pool.Query(ctx, `SELECT `+prefixed("m", entryColumns)+`
		FROM unnest($1::bigint[], $2::bigint[]) AS r(c, a)
		CROSS JOIN LATERAL (SELECT * FROM chat_entry WHERE conversation_id = r.c AND seq > r.a ORDER BY seq LIMIT $3) m
		ORDER BY m.conversation_id, m.seq`, convs, afters, perConv)
	if err != nil {
		return nil, classify("read messages", err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, classify("read messages", err)
	}
	out := make(map[int64][]chat.Message, len(ranges))
	for _, m := range entries {
		out[m.ConversationID] = append(out[m.ConversationID], m)
	}
	return out, nil
}

// SaveCursors upserts delivered cursors in one statement; a cursor never
// moves backwards. Rows of sessions that no longer exist are skipped.
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
	_, err := s.pool.Exec(ctx, `INSERT INTO session_cursor (client_id, conversation_id, delivered_seq)
		SELECT u.client_id, u.conversation_id, max(u.seq)
		FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(client_id, conversation_id, seq)
		WHERE EXISTS (SELECT 1 FROM chat_session s WHERE s.client_id = u.client_id)
		GROUP BY u.client_id, u.conversation_id
		ORDER BY 1, 2
		ON CONFLICT (client_id, conversation_id)
		DO UPDATE SET delivered_seq = GREATEST(session_cursor.delivered_seq, EXCLUDED.delivered_seq)`, ids, convs, seqs)
	if err != nil {
		return classify("save cursors", err)
	}
	return nil
}

// Touch records that a session was seen now (on disconnect), which starts
// its expiry clock.
func (s *Sessions) Touch(ctx context.Context, clientID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE chat_session SET last_seen_at = now() WHERE client_id = $1`, clientID); err != nil {
		return classify("touch session", err)
	}
	return nil
}

// Drop deletes a session and its cursors (clean session ended).
func (s *Sessions) Drop(ctx context.Context, clientID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM chat_session WHERE client_id = $1`, clientID); err != nil {
		return classify("drop session", err)
	}
	return nil
}

// Expire deletes sessions whose expiry passed while offline. A session is
// never expired while connected: online holds the client ids connected to
// this node, and a session another node holds (node_id set, that node's
// heartbeat younger than five minutes) is left to that node.
func (s *Sessions) Expire(ctx context.Context, online []string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM chat_session s WHERE
		s.last_seen_at + make_interval(secs => CASE WHEN s.persistent THEN s.expiry_seconds ELSE 3600 END) < now()
		AND NOT (s.client_id = ANY($1::text[]))
		AND NOT EXISTS (SELECT 1 FROM chat_node n WHERE n.node_id = s.node_id AND n.heartbeat_at > now() - interval '5 minutes')`, online)
	if err != nil {
		return 0, classify("expire sessions", err)
	}
	return tag.RowsAffected(), nil
}

// Members lists the user ids of a conversation, ascending (delivery routing).
func (s *Sessions) Members(ctx context.Context, conversationID int64) ([]int64, error) {
	return members(ctx, s.pool, conversationID)
}
