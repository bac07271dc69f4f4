package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// markReadSQL is the whole watermark rule in one statement: clamp to
// last_seq, move only forward. If a concurrent MarkRead holds the member row,
// PostgreSQL re-evaluates the WHERE against the row it committed, so two
// readers can never move the watermark backwards. What was read was
// delivered: the delivered watermark follows, unless the reader's read
// receipts are off (readMovesDeliveredSQL).
const markReadSQL = `
UPDATE conversation_member m
SET last_read_seq = LEAST($3::bigint, c.last_seq),
    last_delivered_seq = CASE WHEN ` + readMovesDeliveredSQL + `
                              THEN GREATEST(m.last_delivered_seq, LEAST($3::bigint, c.last_seq))
                              ELSE m.last_delivered_seq END
FROM conversation c
WHERE m.conversation_id = $1 AND m.user_id = $2 AND c.id = m.conversation_id
  AND LEAST($3::bigint, c.last_seq) > m.last_read_seq
RETURNING m.last_read_seq, c.last_seq`

// MarkRead moves the user's watermark to min(seq, last_seq) if that is ahead
// of it, and records read.updated in the same transaction when it moved.
func (s *Store) MarkRead(ctx context.Context, conversationID, userID, seq int64) (chat.ReadResult, error) {
	if seq <= 0 {
		return chat.ReadResult{}, chat.Errorf(chat.CodeInvalid, "seq must be a positive integer")
	}
	var res chat.ReadResult
	err := s.writeTx(ctx, "mark read", func(tx pgx.Tx) ([]chat.Event, error) {
		var newSeq, lastSeq int64
		err := tx.QueryRow(ctx, markReadSQL, conversationID, userID, seq).Scan(&newSeq, &lastSeq)
		switch {
		case err == nil:
			res = chat.ReadResult{Advanced: true, LastReadSeq: newSeq}
			ev := chat.ReadEvent(conversationID, userID, newSeq)
			ev.LastSeq = lastSeq
			evs := []chat.Event{ev}
			return evs, readEventsPrivacy(ctx, tx, evs)
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("update watermark: %w", err)
		}
		// Nothing updated: either the watermark is already there, or the
		// caller has no watermark to move.
		var (
			exists  bool
			current *int64
		)
		if err := tx.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM conversation WHERE id = $1),
			       (SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = $2)`,
			conversationID, userID).Scan(&exists, &current); err != nil {
			return nil, fmt.Errorf("read watermark: %w", err)
		}
		switch {
		case !exists:
			return nil, errNoConversation(conversationID)
		case current == nil:
			return nil, errNotMember(conversationID)
		}
		res = chat.ReadResult{Advanced: false, LastReadSeq: *current}
		return nil, nil
	})
	if err != nil {
		return chat.ReadResult{}, err
	}
	return res, nil
}

// readMovesDeliveredSQL is true when member m's reading moves their
// delivered watermark: the delivered watermark is shown to the other
// members, so a reader whose read receipts are off would be seen reading
// through it. Theirs moves by their sessions' acknowledgements alone.
const readMovesDeliveredSQL = `NOT EXISTS (SELECT 1 FROM user_settings rs WHERE rs.user_id = m.user_id AND NOT rs.read_receipts)`

// SeenBy counts the members other than the message's sender whose read
// watermark is at or past seq, and those whose delivered watermark is (a
// read watermark counts as delivered too, unless its member's read
// receipts are off and the member is not the caller: as viewWatermarks
// shows lastDeliveredSeq).
func (s *Store) SeenBy(ctx context.Context, conversationID, userID, seq int64) (chat.SeenResult, error) {
	if seq <= 0 {
		return chat.SeenResult{}, chat.Errorf(chat.CodeInvalid, "seq must be a positive integer")
	}
	var res chat.SeenResult
	err := s.runTx(ctx, "seen by", readOnly(), func(tx pgx.Tx) error {
		conv, err := memberConversation(ctx, tx, conversationID, userID)
		if err != nil {
			return err
		}
		// What a member may not read (before their join, in a group whose
		// history is "joined") does not exist for them: neither do its
		// receipts.
		floor, err := historyFloor(ctx, tx, conversationID, userID)
		if err != nil {
			return err
		}
		var kind string
		if seq > floor && seq <= conv.LastSeq {
			if err := tx.QueryRow(ctx, `SELECT kind FROM message WHERE conversation_id = $1 AND seq = $2`, conversationID, seq).Scan(&kind); err != nil {
				return fmt.Errorf("read message %d: %w", seq, err)
			}
		}
		if kind != string(chat.KindMessage) {
			// Only messages are seen; an edit or reaction is not.
			return chat.Errorf(chat.CodeNotFound, "message %d does not exist in conversation %d", seq, conversationID)
		}
		// Counting only members who are not the sender makes "the sender
		// left" and "the sender is still here" both come out right. Only
		// members the message was sent to count (joined before it): one
		// added later starts with watermarks at their join, past it, but
		// never saw it (and, in a "joined" group, may not read it).
		// Members whose read receipts are off are never seen, nor
		// delivered by reading but to themselves (their own
		// lastDeliveredSeq counts it: viewWatermarks); a caller whose
		// receipts are off sees nobody (Hidden).
		err = tx.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE cm.last_read_seq >= msg.seq AND s.user_id IS NULL),
			       count(*) FILTER (WHERE GREATEST(cm.last_delivered_seq, CASE WHEN s.user_id IS NULL OR cm.user_id = $3 THEN cm.last_read_seq ELSE 0 END) >= msg.seq),
			       count(*),
			       EXISTS (SELECT 1 FROM user_settings v WHERE v.user_id = $3 AND NOT v.read_receipts)
			FROM message msg
			JOIN member_watermark cm ON cm.conversation_id = msg.conversation_id AND cm.user_id <> msg.sender_id
			                       AND cm.join_seq < msg.seq
			LEFT JOIN user_settings s ON s.user_id = cm.user_id AND NOT s.read_receipts
			WHERE msg.conversation_id = $1 AND msg.seq = $2`,
			conversationID, seq, userID).Scan(&res.SeenBy, &res.DeliveredTo, &res.Members, &res.Hidden)
		if res.Hidden {
			res.SeenBy = 0
		}
		if err != nil {
			return fmt.Errorf("count readers: %w", err)
		}
		return nil
	})
	if err != nil {
		return chat.SeenResult{}, err
	}
	return res, nil
}
