package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// entryColumns are what scanEntry reads from the chat_entry view
// (migrations/functions.sql), the one definition of how an entry reads.
const entryColumns = `conversation_id, seq, kind, sender_id, client_msg_id::text, body, created_at,
	target_seq, emoji, reaction_on, reaction_count, edited_at, recalled_at,
	reply_to, reply_sender, reply_snippet, reply_recalled,
	forwarded_conversation_id, forwarded_seq, forwarded_sender_id, msg_type, attachments, reply_msg_type`

func scanEntry(row pgx.CollectableRow) (chat.Message, error) { return scanEntryAnd(row) }

// scanEntryAnd scans an entry's columns (entryColumns), then into extra
// the columns its query selects after them.
func scanEntryAnd(row pgx.CollectableRow, extra ...any) (chat.Message, error) {
	var (
		m                            chat.Message
		kind                         string
		target, replyTo, replySender *int64
		fwdConv, fwdSeq, fwdSender   *int64
		emoji, snippet               *string
		on, replyRecalled            *bool
		count                        *int32
		recalledAt                   *time.Time
		msgType, replyMsgType        *string
		attachments                  []byte
	)
	err := row.Scan(append([]any{&m.ConversationID, &m.Seq, &kind, &m.SenderID, &m.ClientMsgID, &m.Body, &m.CreatedAt,
		&target, &emoji, &on, &count, &m.EditedAt, &recalledAt,
		&replyTo, &replySender, &snippet, &replyRecalled,
		&fwdConv, &fwdSeq, &fwdSender, &msgType, &attachments, &replyMsgType}, extra...)...)
	if err != nil {
		return m, err
	}
	if msgType != nil {
		m.MsgType = *msgType
	}
	if len(attachments) > 0 {
		if err := json.Unmarshal(attachments, &m.Attachments); err != nil {
			return m, fmt.Errorf("decode attachments of %d/%d: %w", m.ConversationID, m.Seq, err)
		}
	}
	m.Kind = chat.EntryKind(kind)
	if target != nil {
		m.TargetSeq = *target
	}
	if emoji != nil {
		m.Emoji = *emoji
	}
	if on != nil {
		m.On = *on
	}
	if count != nil {
		m.Count = int(*count)
	}
	if m.Kind == chat.KindSystem {
		// A system entry's body is its description (store/system.go).
		if m.System, err = chat.DecodeSystemEntry(m.Body); err != nil {
			return m, err
		}
		m.Body = ""
	}
	if replyTo != nil {
		m.ReplyTo = replyRef(*replyTo, replySender, snippet, replyMsgType, replyRecalled)
	}
	if fwdConv != nil && fwdSeq != nil {
		m.ForwardedFrom = &chat.ForwardRef{ConversationID: *fwdConv, Seq: *fwdSeq, SenderID: deref(fwdSender)}
	}
	if recalledAt != nil && m.Kind == chat.KindMessage {
		m = m.AsRecalled(recalledAt)
	}
	return m, nil
}

// replyRef is the quote of message seq as chatd read it (chat_entry's
// reply_* columns, chat_send_batch's o_target_*): a recalled message's
// has neither snippet nor type.
func replyRef(seq int64, sender *int64, snippet, msgType *string, recalled *bool) *chat.ReplyRef {
	ref := &chat.ReplyRef{Seq: seq, SenderID: deref(sender)}
	if recalled != nil && *recalled {
		ref.Recalled = true
		return ref
	}
	ref.Snippet, ref.MsgType = derefStr(snippet), derefStr(msgType)
	return ref
}

// reactionsSQL aggregates the reactions on a page's messages, and whether
// the reader set each, in the order live reaction.updated events show them:
// each emoji where it last appeared (appeared_seq, the set that took its
// count from 0 to 1, which chat_send_batch keeps on every row of the
// emoji), so one whose first setter took theirs off while others still
// carry it keeps its place, and one that went and came back is last.
//
// $4 and $5, the page's lowest and highest seq, bound the index scan to
// the page. With seq = ANY alone, a planner expecting few reactions in the
// conversation (one that grew since the table was last analyzed, or any
// conversation in a cached generic plan) scans all of them and filters
// (an array on the key's second column costs an index descent per
// element): 200,000 rows for a page of 50. The range is one descent that
// reads the page's reactions only.
const reactionsSQL = `
SELECT seq, emoji, count(*)::int, bool_or(user_id = $3)
FROM reaction WHERE conversation_id = $1 AND seq >= $4 AND seq <= $5 AND seq = ANY($2::bigint[])
GROUP BY seq, emoji ORDER BY seq, min(appeared_seq), min(created_at), emoji`

// addReactions fills the Reactions of the messages of entries, as reader
// sees them, in one query.
func addReactions(ctx context.Context, q pgx.Tx, conv, reader int64, entries []chat.Message) error {
	var seqs []int64
	at := map[int64]int{}
	for i, m := range entries {
		if m.IsMessage() && !m.Recalled {
			seqs = append(seqs, m.Seq)
			at[m.Seq] = i
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, reactionsSQL, conv, seqs, reader, slices.Min(seqs), slices.Max(seqs))
	if err != nil {
		return fmt.Errorf("read reactions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var rc chat.ReactionCount
		if err := rows.Scan(&seq, &rc.Emoji, &rc.Count, &rc.Me); err != nil {
			return fmt.Errorf("read reactions: %w", err)
		}
		m := &entries[at[seq]]
		m.Reactions = append(m.Reactions, rc)
	}
	return rows.Err()
}

// quotedJoin joins quoted.snippet, what reply e quotes for a reader whose
// history floor is the SQL expression floor, reading as of entry upto (an
// SQL expression, 0: now); entryColumns' reply_snippet is
// COALESCE(quoted.snippet, e.reply_snippet) then (quotedColumn). A quote
// is the first 100 characters of the message as it is now, except:
//   - for a reader whose floor hides the message's edits
//     (chat.FloorHidesEdit), the quote the reply was sent with, the
//     message as it was at the reply (chat_message_at): live delivery gave
//     them that quote, and the edits since without their bodies, which
//     the quote must not show either;
//   - for a reader who left (upto), the message as it was at the leave at
//     the latest: what was written after it is not theirs to read.
//
// Every other reply, and every entry that is none, reads nothing here:
// OFFSET 0 keeps the subquery from being flattened into the join, whose
// filter would then run only after chat_message_at's lookups; kept apart,
// its WHERE (of e only) is a one-time filter that skips them.
func quotedJoin(floor, upto string) string {
	return `LEFT JOIN LATERAL (SELECT left(q.body, 100) AS snippet
		FROM chat_message_at(e.conversation_id, e.reply_to, CASE WHEN e.reply_to <= ` + floor + ` THEN e.seq ELSE ` + upto + ` END) q
		WHERE e.reply_to IS NOT NULL AND (e.reply_to <= ` + floor + ` OR ` + upto + ` > 0) OFFSET 0) quoted ON true`
}

// quotedColumn is the reply_snippet of entries read with quotedJoin.
const quotedColumn = "COALESCE(quoted.snippet, e.reply_snippet)"

// prefixedExcept qualifies each of a comma-separated column list with
// alias, but reads the columns named in exprs as their expression; it panics when one is not among columns, so a
// renamed column cannot silently drop its expression.
func prefixedExcept(alias, columns string, exprs map[string]string) string {
	parts := strings.Split(columns, ",")
	used := 0
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if e, ok := exprs[p]; ok {
			parts[i] = e
			used++
			continue
		}
		parts[i] = alias + "." + p
	}
	if used != len(exprs) {
		panic(fmt.Sprintf("store: %d of the column expressions %v name no column of %q", len(exprs)-used, exprs, columns))
	}
	return strings.Join(parts, ", ")
}

var _ chat.EntryReader = (*Sessions)(nil)

// entriesSQL reads the entries of refs, a reply quoting the message as it
// was at the reply (quotedJoin with the reply itself as the floor): the
// quote its commit published live, which every node must deliver alike.
var entriesSQL = `SELECT ` + prefixedExcept("e", entryColumns, map[string]string{"reply_snippet": quotedColumn}) + `
		FROM unnest($1::bigint[], $2::bigint[]) AS r(c, q)
		JOIN chat_entry e ON e.conversation_id = r.c AND e.seq = r.q
		` + quotedJoin("e.seq", "0")

// Entries reads the entries refs name, as they are now but for what a
// reply quotes (entriesSQL), in one query.
func (s *Sessions) Entries(ctx context.Context, refs []chat.MessageRef) (map[chat.MessageRef]chat.Message, error) {
	convs := make([]int64, len(refs))
	seqs := make([]int64, len(refs))
	for i, r := range refs {
		convs[i], seqs[i] = r.ConversationID, r.Seq
	}
	rows, err := s.pool.Query(ctx, entriesSQL, convs, seqs)
	if err != nil {
		return nil, classify("read entries", err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, classify("read entries", err)
	}
	out := make(map[chat.MessageRef]chat.Message, len(entries))
	for _, m := range entries {
		out[chat.MessageRef{ConversationID: m.ConversationID, Seq: m.Seq}] = m
	}
	return out, nil
}
