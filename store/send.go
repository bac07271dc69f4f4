package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// sendLockSQL serialises the senders of one conversation.
const sendLockSQL = `SELECT last_seq FROM conversation WHERE id = $1 FOR UPDATE`

// sendCheckSQL runs as its own statement after the lock is granted, so its
// READ COMMITTED snapshot includes whatever the previous lock holder
// committed: a concurrent send of the same clientMsgId is seen here and
// answered as a duplicate instead of colliding on the unique index.
//
// created_at is taken now, under the lock, and never earlier than the
// previous message's: messages are timestamped in seq order and the inbox's
// sort key never moves backwards, which now() (the transaction start, before
// a possibly long wait for the lock) would not give.
const sendCheckSQL = `
SELECT EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = $1 AND user_id = $2),
       GREATEST(clock_timestamp(), c.last_message_at),
       m.seq, m.sender_id, m.body, m.created_at
FROM conversation c
LEFT JOIN message m ON m.conversation_id = c.id AND m.client_msg_id = $3
WHERE c.id = $1`

// sendWriteSQL is all of a send's writes in one round trip: the message, the
// conversation's last_seq, the sender's own watermark (they have read what
// they wrote) and the outbox row.
const sendWriteSQL = `
WITH msg AS (
	INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at)
	VALUES ($1, $2, $3, $4, $5, $6)
), conv AS (
	UPDATE conversation SET last_seq = $2, last_message_at = $6 WHERE id = $1
), reader AS (
	UPDATE conversation_member SET last_read_seq = GREATEST(last_read_seq, $2)
	WHERE conversation_id = $1 AND user_id = $3
)
INSERT INTO outbox (msg_key, payload) VALUES ($7, $8)`

// messageClientIDConstraint is the unique (conversation_id, client_msg_id)
// index PostgreSQL names by default.
const messageClientIDConstraint = "message_conversation_id_client_msg_id_key"

// Send commits one message. See the package doc for why it cannot produce
// gaps or duplicate seqs.
func (s *Store) Send(ctx context.Context, req chat.SendRequest) (chat.SendResult, error) {
	// The Service validated already; validating again keeps a direct caller
	// (or a malformed UUID) from reaching PostgreSQL as a 500.
	if err := s.limits.ValidateSend(&req); err != nil {
		return chat.SendResult{}, err
	}
	if s.batching {
		return s.sendBatched(ctx, req)
	}
	res, err := s.send(ctx, req)
	if isUniqueViolation(err, messageClientIDConstraint) {
		// Only possible if a message was inserted without the conversation
		// lock; a second attempt then sees it and answers duplicate/conflict.
		res, err = s.send(ctx, req)
	}
	return res, err
}

func (s *Store) send(ctx context.Context, req chat.SendRequest) (chat.SendResult, error) {
	var res chat.SendResult
	err := s.inTx(ctx, "send", func(tx pgx.Tx) error {
		// Pipelined: the server binds the check only after the lock
		// statement has finished, so one round trip still gives the check a
		// post-lock snapshot.
		b := &pgx.Batch{}
		b.Queue(sendLockSQL, req.ConversationID)
		b.Queue(sendCheckSQL, req.ConversationID, req.SenderID, req.ClientMsgID)
		br := tx.SendBatch(ctx, b)
		var lastSeq int64
		if err := br.QueryRow().Scan(&lastSeq); err != nil {
			_ = br.Close()
			if errors.Is(err, pgx.ErrNoRows) {
				return errNoConversation(req.ConversationID)
			}
			return fmt.Errorf("lock conversation: %w", err)
		}
		var (
			member    bool
			now       time.Time
			dupSeq    *int64
			dupSender *int64
			dupBody   *string
			dupAt     *time.Time
		)
		if err := br.QueryRow().Scan(&member, &now, &dupSeq, &dupSender, &dupBody, &dupAt); err != nil {
			_ = br.Close()
			return fmt.Errorf("check membership and clientMsgId: %w", err)
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("check membership and clientMsgId: %w", err)
		}
		if !member {
			return errNotMember(req.ConversationID)
		}
		if dupSeq != nil {
			if *dupSender != req.SenderID {
				return chat.Errorf(chat.CodeConflict, "clientMsgId %s is already used in this conversation by another sender", req.ClientMsgID)
			}
			res = chat.SendResult{Duplicate: true, Message: chat.Message{
				ConversationID: req.ConversationID, Seq: *dupSeq, SenderID: *dupSender,
				ClientMsgID: req.ClientMsgID, Body: *dupBody, CreatedAt: *dupAt,
			}}
			return nil
		}
		msg := chat.Message{
			ConversationID: req.ConversationID, Seq: lastSeq + 1, SenderID: req.SenderID,
			ClientMsgID: req.ClientMsgID, Body: req.Body, CreatedAt: now,
		}
		ev, err := newOutboxRow(chat.MessageEvent(msg))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sendWriteSQL, msg.ConversationID, msg.Seq, msg.SenderID,
			msg.ClientMsgID, msg.Body, msg.CreatedAt, ev.key, ev.payload); err != nil {
			return fmt.Errorf("insert message %d: %w", msg.Seq, err)
		}
		res = chat.SendResult{Message: msg}
		return nil
	})
	if err != nil {
		return chat.SendResult{}, err
	}
	return res, nil
}

// sendBatched queues the send for group commit and waits for its outcome.
// A caller whose ctx ends before a batch takes its send is answered
// unavailable and the send is skipped; once taken, it waits for the batch's
// real outcome (the batch ends by the caller's deadline), so a send answered
// unavailable never commits later.
func (s *Store) sendBatched(ctx context.Context, req chat.SendRequest) (chat.SendResult, error) {
	if s.closed.Load() {
		return chat.SendResult{}, errShuttingDown()
	}
	s.batchOnce.Do(func() {
		b := newBatcher(s)
		s.batch.Store(b)
		go b.run()
	})
	b := s.batch.Load()
	if b == nil { // Close came first
		return chat.SendResult{}, errShuttingDown()
	}
	r := &sendReq{ctx: ctx, req: req, done: make(chan struct{})}
	select {
	case b.intake <- r:
	case <-ctx.Done():
		return chat.SendResult{}, chat.Unavailable("send", ctx.Err())
	}
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		if r.taken.Load() {
			// Its transaction is running under this ctx's deadline: the
			// outcome is moments away and must be reported as it is.
			<-r.done
			return r.res, r.err
		}
		return chat.SendResult{}, chat.Unavailable("send", ctx.Err())
	}
}
