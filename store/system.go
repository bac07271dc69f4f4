package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// System entries: a membership or settings change writes, in its own
// transaction and after it decided who may make it, one entry of kind
// system per thing members should see in history ("Ann added Bo"). They
// are written by chat_send_batch (migrations/functions.sql), the one
// writer of stream entries, so the rules that make the stream gapless
// (seq = last_seq + 1 under the conversation row's lock, one outbox row
// referencing the entry, created_at never before the previous message)
// stay written once; the membership transaction already holds that lock,
// which chat_send_batch takes again (a no-op in the same transaction).
// Group commit's batcher never sees them: a system entry commits with the
// change it records or not at all.

// appendSystem writes entries for actorID in conversationID, in order, and
// returns them as committed (seqs, times). The transaction must hold the
// conversation row's lock.
func appendSystem(ctx context.Context, tx pgx.Tx, conversationID, actorID int64, entries ...chat.SystemEntry) ([]chat.Message, error) {
	n := len(entries)
	if n == 0 {
		return nil, nil
	}
	kinds, convs, senders := make([]string, n), make([]int64, n), make([]int64, n)
	ids, bodies, emoji := make([]string, n), make([]string, n), make([]string, n)
	targets, on := make([]int64, n), make([]bool, n)
	nulls := make([]*int64, n)
	for i, e := range entries {
		body, err := chat.EncodeSystemEntry(e)
		if err != nil {
			return nil, err
		}
		kinds[i], convs[i], senders[i], ids[i], bodies[i] = string(chat.KindSystem), conversationID, actorID, uuid.NewString(), body
	}
	// No trace context ($13, $14): tracing follows sends, and a system
	// entry is a by-product of a membership or settings change. No
	// attachments ($15, $16). System entries are a plain batch
	// (chat_send_batch_plain).
	rows, err := tx.Query(ctx, sendPlainBatchSQL, kinds, convs, senders, ids, bodies, targets, nulls, nulls, emoji, on, nil, nil, nil, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("write system entries: %w", err)
	}
	defer rows.Close()
	out := make([]chat.Message, 0, n)
	for rows.Next() {
		var o outcome
		if err := rows.Scan(&o.status, &o.seq, &o.sender, &o.body, &o.at, &o.targetSender, &o.snippet, &o.targetRecalled, &o.count,
			&o.msgType, &o.attachments, &o.recalledAt, &o.editedAt, &o.targetMsgType); err != nil {
			return nil, fmt.Errorf("write system entries: %w", err)
		}
		i := len(out)
		if i >= n || o.status != outNew || o.seq == nil || o.at == nil {
			return nil, fmt.Errorf("write system entry %d of conversation %d: outcome %d", i, conversationID, o.status)
		}
		e := entries[i]
		out = append(out, chat.Message{ConversationID: conversationID, Seq: *o.seq, Kind: chat.KindSystem, SenderID: actorID,
			ClientMsgID: ids[i], CreatedAt: o.at.UTC(), System: &e})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("write system entries: %w", err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("write system entries: %d outcomes for %d entries", len(out), n)
	}
	return out, nil
}

// systemEvents are the events of committed system entries.
func systemEvents(ms []chat.Message) []chat.Event {
	evs := make([]chat.Event, len(ms))
	for i, m := range ms {
		evs[i] = chat.SystemEvent(m)
	}
	return evs
}

// changeTx runs fn, a change of group conversationID that takes the
// conversation's lock (lockGroup) before it writes anything, in a READ
// COMMITTED transaction and publishes, after the commit, the events fn
// returns, in its order, and after those of the changes of the group
// that committed before it on this node (orderedTx: conversation.updated
// carries every setting, and clients apply it as it comes). Unlike
// writeTx, fn writes its outbox rows itself (insertOutbox; appendSystem
// writes those of its entries), so the outbox order, which nodes fed by
// Kafka route by, is the order the events are published in here.
func (s *Store) changeTx(ctx context.Context, op string, conversationID int64, fn func(pgx.Tx) ([]chat.Event, error)) error {
	return s.orderedTx(ctx, op, func(tx pgx.Tx, t **turn) ([]chat.Event, error) {
		evs, err := fn(tx)
		if err == nil && len(evs) > 0 {
			// Under the conversation's lock, held to the commit.
			*t = s.groupOrder.next(conversationID)
		}
		return evs, err
	})
}
