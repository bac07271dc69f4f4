package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	chat "github.com/chatd/chatd"
)

// Both history queries are range scans of the (conversation_id, seq) primary
// key that stop after LIMIT rows, whatever the conversation's size; $4 is
// the reader's history floor, which also decides what their replies quote
// (quotedJoin).
var (
	historyAfterSQL = `SELECT ` + historyColumns + ` FROM chat_entry e ` + quotedJoin("$4", "0") + `
		WHERE e.conversation_id = $1 AND e.seq > $2 ORDER BY e.seq ASC LIMIT $3`
	historyBeforeSQL = `SELECT ` + historyColumns + ` FROM chat_entry e ` + quotedJoin("$4", "0") + `
		WHERE e.conversation_id = $1 AND e.seq < $2 AND e.seq > $4 ORDER BY e.seq DESC LIMIT $3`
	historyColumns = prefixedExcept("e", entryColumns, map[string]string{"reply_snippet": quotedColumn})
)

// History pages a conversation's entries for a member, ascending by seq:
// messages as they are now (body after the last edit, recalled, the
// reactions as the member sees them), and the edits, recalls and
// reactions themselves, so a client paging forward can apply them.
func (s *Store) History(ctx context.Context, q chat.HistoryQuery) ([]chat.Message, error) {
	page, err := s.history(ctx, q, false)
	return page.Messages, err
}

var _ chat.HistoryPager = (*Store)(nil)

// HistoryPage is History plus the lowest delivered and read watermarks of
// the members other than the caller, from the same snapshot.
func (s *Store) HistoryPage(ctx context.Context, q chat.HistoryQuery) (chat.HistoryPage, error) {
	return s.history(ctx, q, true)
}

// peerReadSQL is the read watermark other members see of member o
// (member_watermark) with user_settings s joined when o's read receipts
// are off: such a member counts as having read nothing since their join,
// and as nothing at all for what came before it (their join_seq): like
// "seen by N" (SeenBy), readSeq is about the members a message was sent
// to, and a member added later must not make what those read unread.
const peerReadSQL = `CASE WHEN s.user_id IS NULL THEN o.last_read_seq ELSE o.join_seq END`

// peerWatermarksSQL: the lowest watermarks of the members other than $2.
// Reading implies delivery, hence GREATEST; nobody else gives 0. A member
// whose read receipts are off counts as having read nothing (peerReadSQL;
// nor received by reading), and a caller whose receipts are off sees 0
// (people.go).
const peerWatermarksSQL = `
SELECT COALESCE(min(GREATEST(o.last_delivered_seq, ` + peerReadSQL + `)), 0),
       CASE WHEN EXISTS (SELECT 1 FROM user_settings v WHERE v.user_id = $2 AND NOT v.read_receipts) THEN 0
            ELSE COALESCE(min(` + peerReadSQL + `), 0) END
FROM member_watermark o
LEFT JOIN user_settings s ON s.user_id = o.user_id AND NOT s.read_receipts
WHERE o.conversation_id = $1 AND o.user_id <> $2`

func (s *Store) history(ctx context.Context, q chat.HistoryQuery, watermarks bool) (chat.HistoryPage, error) {
	if q.BeforeSeq < 0 || q.AfterSeq < 0 {
		return chat.HistoryPage{}, chat.Errorf(chat.CodeInvalid, "beforeSeq and afterSeq must not be negative")
	}
	forward := q.Forward || q.AfterSeq > 0
	if q.BeforeSeq > 0 && forward {
		return chat.HistoryPage{}, chat.Errorf(chat.CodeInvalid, "give beforeSeq or afterSeq, not both")
	}
	limit := chat.ClampLimit(q.Limit, chat.DefaultHistoryLimit, chat.MaxHistoryLimit)
	var msgs []chat.Message
	var page chat.HistoryPage
	err := s.runTx(ctx, "history", readOnly(), func(tx pgx.Tx) error {
		// floor: in a group whose history is "joined", a member reads only
		// what came after their join (people.go, historyFloor).
		floor, err := historyFloor(ctx, tx, q.ConversationID, q.UserID)
		if err != nil {
			return err
		}
		if watermarks {
			if err := tx.QueryRow(ctx, peerWatermarksSQL, q.ConversationID, q.UserID).Scan(&page.DeliveredSeq, &page.ReadSeq); err != nil {
				return fmt.Errorf("read watermarks: %w", err)
			}
		}
		var rows pgx.Rows
		if forward {
			rows, err = tx.Query(ctx, historyAfterSQL, q.ConversationID, max(q.AfterSeq, floor), limit, floor)
		} else {
			// A real bound instead of "$2 = 0 OR ..." keeps the generic plan
			// of the prepared statement an index range scan.
			before := q.BeforeSeq
			if before == 0 {
				before = math.MaxInt64
			}
			rows, err = tx.Query(ctx, historyBeforeSQL, q.ConversationID, before, limit, floor)
		}
		if err != nil {
			return fmt.Errorf("read messages: %w", err)
		}
		if msgs, err = pgx.CollectRows(rows, scanEntry); err != nil {
			return fmt.Errorf("read messages: %w", err)
		}
		if !forward {
			slices.Reverse(msgs)
		}
		chat.HideBeforeFloor(msgs, floor)
		return addReactions(ctx, tx, q.ConversationID, q.UserID, msgs)
	})
	if err != nil {
		return chat.HistoryPage{}, err
	}
	if msgs == nil {
		msgs = []chat.Message{}
	}
	page.Messages = msgs
	return page, nil
}

// inboxSQL pages the user's conversations by (last activity, id) descending,
// strictly after the cursor row. The last activity is the newest message
// the user may read (lastMessageAtSQL), else their join to a group whose
// history they read from it on, else the conversation's creation: a
// message before their floor moves nothing and shows nothing. The last message is looked up by primary
// key only for the rows of the page, after the LIMIT.
const inboxSQL = `
SELECT p.id, p.type, p.title, p.last_seq, p.join_seq, p.last_read_seq, p.last_message_at, p.sort_at,
       chat_unread(p.id, p.last_read_seq, p.message_count),
       lm.seq, lm.sender_id, lm.client_msg_id::text, lm.body, lm.created_at, lm.edited_at, lm.recalled_at,
       lm.msg_type, pw.peer_delivered, CASE WHEN me.hidden THEN 0 ELSE pw.peer_read END, p.avatar_url, peer.user_id
FROM (
	SELECT c.id, c.type, c.title, c.last_seq, m.join_seq, m.last_read_seq, v.last_message_at, c.message_count, c.last_message_seq,
	       v.sort_at, c.avatar_url, f.floor
	FROM conversation_member m
	JOIN conversation c ON c.id = m.conversation_id
	CROSS JOIN LATERAL (SELECT ` + floorSQL + ` AS floor) f
	CROSS JOIN LATERAL (SELECT ` + lastMessageAtSQL + ` AS last_message_at) l
	CROSS JOIN LATERAL (SELECT l.last_message_at,
	       COALESCE(l.last_message_at, CASE WHEN f.floor > 0 THEN m.joined_at ELSE c.created_at END) AS sort_at) v
	WHERE m.user_id = $1
	  AND (v.sort_at, c.id) < ($2::timestamptz, $3::bigint)
	ORDER BY v.sort_at DESC, c.id DESC
	LIMIT $4
) p
LEFT JOIN LATERAL (
	SELECT seq, sender_id, client_msg_id, body, created_at, edited_at, recalled_at, msg_type FROM message
	WHERE conversation_id = p.id AND seq = p.last_message_seq AND p.last_message_seq > p.floor
) lm ON true
CROSS JOIN LATERAL (
	SELECT COALESCE(min(GREATEST(o.last_delivered_seq, ` + peerReadSQL + `)), 0) AS peer_delivered,
	       COALESCE(min(` + peerReadSQL + `), 0) AS peer_read
	FROM member_watermark o LEFT JOIN user_settings s ON s.user_id = o.user_id AND NOT s.read_receipts
	WHERE o.conversation_id = p.id AND o.user_id <> $1
) pw
LEFT JOIN LATERAL (
	SELECT o.user_id FROM conversation_member o WHERE p.type = 'DIRECT' AND o.conversation_id = p.id AND o.user_id <> $1 LIMIT 1
) peer ON true
CROSS JOIN (SELECT EXISTS (SELECT 1 FROM user_settings v WHERE v.user_id = $1 AND NOT v.read_receipts) AS hidden) me
ORDER BY p.sort_at DESC, p.id DESC`

// Inbox pages the user's conversations, most recent message first. Unread
// is the number of messages (not edits, recalls or reactions) after the
// user's read watermark, wherever it points (SQL chat_unread).
// LastMessage is the newest message as it is now; DeliveredSeq and ReadSeq
// are the other members' lowest watermarks.
func (s *Store) Inbox(ctx context.Context, userID int64, limit int, cursor string) (chat.InboxPage, error) {
	limit = chat.ClampLimit(limit, chat.DefaultInboxLimit, chat.MaxInboxLimit)
	// The first page starts above every possible row: 'infinity' sorts after
	// every timestamp, so one query text (one prepared plan) serves all pages.
	afterAt := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	afterID := int64(math.MaxInt64)
	if cursor != "" {
		micros, id, err := chat.DecodeInboxCursor(cursor)
		if err != nil {
			return chat.InboxPage{}, err
		}
		afterAt, afterID = pgtype.Timestamptz{Time: time.UnixMicro(micros), Valid: true}, id
	}
	page := chat.InboxPage{Conversations: []chat.InboxEntry{}}
	err := s.runTx(ctx, "inbox", readOnly(), func(tx pgx.Tx) error {
		// One row more than asked tells whether another page exists.
		rows, err := tx.Query(ctx, inboxSQL, userID, afterAt, afterID, limit+1)
		if err != nil {
			return fmt.Errorf("read inbox: %w", err)
		}
		defer rows.Close()
		var lastSortAt time.Time
		for rows.Next() {
			if len(page.Conversations) == limit {
				page.NextCursor = chat.EncodeInboxCursor(lastSortAt.UnixMicro(), page.Conversations[limit-1].ID)
				break
			}
			var (
				e          chat.InboxEntry
				sortAt     time.Time
				lmSeq      *int64
				lmFrom     *int64
				lmID       *string
				lmBody     *string
				lmAtPtr    *time.Time
				lmEdited   *time.Time
				lmRecalled *time.Time
				lmType     *string
				peer       *int64
			)
			if err := rows.Scan(&e.ID, &e.Type, &e.Title, &e.LastSeq, &e.JoinSeq, &e.LastReadSeq, &e.LastMessageAt, &sortAt, &e.Unread,
				&lmSeq, &lmFrom, &lmID, &lmBody, &lmAtPtr, &lmEdited, &lmRecalled, &lmType, &e.DeliveredSeq, &e.ReadSeq, &e.Avatar, &peer); err != nil {
				return fmt.Errorf("read inbox: %w", err)
			}
			e.Unread = max(e.Unread, 0)
			if peer != nil {
				e.PeerID = *peer
			}
			if lmSeq != nil {
				e.LastMessage = &chat.Message{ConversationID: e.ID, Seq: *lmSeq, Kind: chat.KindMessage, SenderID: *lmFrom,
					ClientMsgID: *lmID, Body: *lmBody, CreatedAt: *lmAtPtr, EditedAt: lmEdited}
				if lmType != nil {
					// The inbox says "a photo"; history has the files.
					e.LastMessage.MsgType = *lmType
				}
				if lmRecalled != nil {
					*e.LastMessage = e.LastMessage.AsRecalled(lmRecalled)
				}
			}
			page.Conversations = append(page.Conversations, e)
			lastSortAt = sortAt
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read inbox: %w", err)
		}
		return nil
	})
	if err != nil {
		return chat.InboxPage{}, err
	}
	return page, nil
}
