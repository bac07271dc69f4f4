package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// commitBatch commits a batch of sends (batcher.go gathers them; a lone
// send is a batch of one) in one transaction and one round trip whatever
// the batch size: BEGIN, the deferred relay wake-up and the deadline, a
// call of chat_send_batch (migrations/functions.sql holds every rule of a
// send) and COMMIT, pipelined. Each round trip wakes both PostgreSQL and
// this process; on an idle server that, not the SQL, is most of a lone
// send's latency. The relay is woken afterwards, off the senders' path.
//
// Each request gets its own outcome: a duplicate, a non-member or an unknown
// conversation fails (or answers) alone while the rest commit. Within a
// conversation seqs follow the batch's order, which is arrival order.
// It returns an error only for a failure of the whole transaction.
//
// PostgreSQL itself enforces deadline (statement_timeout on the call),
// and ctx should allow a little longer: the COMMIT travels in the same
// pipeline as the call, so a batch cancelled from this side could still
// commit after its callers were told "unavailable" (a cancel request
// races the lock it waits for). Reading PostgreSQL's own answer gives each
// caller the real outcome.
func (s *Store) commitBatch(ctx context.Context, deadline time.Time, reqs []*sendReq) error {
	conv := make([]int64, len(reqs))
	sender := make([]int64, len(reqs))
	id := make([]string, len(reqs))
	body := make([]string, len(reqs))
	for i, r := range reqs {
		conv[i], sender[i], id[i], body[i] = r.req.ConversationID, r.req.SenderID, r.req.ClientMsgID, r.req.Body
	}
	pool := s.pool
	if s.sendPool != nil {
		pool = s.sendPool
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return classify("send", fmt.Errorf("acquire connection: %w", err))
	}
	defer conn.Release()
	remaining := time.Until(deadline).Milliseconds()
	if remaining < 1 {
		return chat.Unavailable("send", context.DeadlineExceeded)
	}
	if err := sendBatchTx(ctx, conn.Conn(), remaining, reqs, conv, sender, id, body); err != nil {
		endOpenTx(conn.Conn())
		return classify("send", err)
	}
	return nil
}

// Outcomes chat_send_batch reports per send.
const (
	sendNew = iota
	sendDuplicate
	sendConflict
	sendNotMember
	sendNoConversation
)

// sendBatchTx runs the batch's transaction as one pipeline and fills in each
// request's outcome.
func sendBatchTx(ctx context.Context, conn *pgx.Conn, timeoutMillis int64, reqs []*sendReq, conv, sender []int64, id, body []string) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	// The relay is woken after COMMIT (relayWaker); the call must end by
	// the batch's deadline.
	b.Queue(`SELECT set_config('chat.defer_notify', 'on', true), set_config('statement_timeout', $1, true)`,
		strconv.FormatInt(timeoutMillis, 10))
	b.Queue(`SELECT o_status, o_seq, o_sender, o_body, o_at FROM chat_send_batch($1::bigint[], $2::bigint[], $3::uuid[], $4::text[])`,
		conv, sender, id, body)
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("write %d messages: %w", len(reqs), err)
	}
	i := 0
	for rows.Next() {
		var (
			status   int16
			seq, who *int64
			stored   *string
			at       *time.Time
		)
		if err := rows.Scan(&status, &seq, &who, &stored, &at); err != nil {
			rows.Close()
			return fmt.Errorf("write %d messages: %w", len(reqs), err)
		}
		if i >= len(reqs) {
			rows.Close()
			return fmt.Errorf("write %d messages: more outcomes than sends", len(reqs))
		}
		r, q := reqs[i], reqs[i].req
		i++
		switch {
		case status == sendNoConversation:
			r.err = errNoConversation(q.ConversationID)
		case status == sendNotMember:
			r.err = errNotMember(q.ConversationID)
		case status == sendConflict:
			r.err = chat.Errorf(chat.CodeConflict, "clientMsgId %s is already used in this conversation by another sender", q.ClientMsgID)
		case status == sendNew && seq != nil && at != nil:
			r.res = chat.SendResult{Message: chat.Message{ConversationID: q.ConversationID, Seq: *seq, SenderID: q.SenderID,
				ClientMsgID: q.ClientMsgID, Body: q.Body, CreatedAt: *at}}
		case status == sendDuplicate && seq != nil && who != nil && stored != nil && at != nil:
			r.res = chat.SendResult{Duplicate: true, Message: chat.Message{ConversationID: q.ConversationID, Seq: *seq,
				SenderID: *who, ClientMsgID: q.ClientMsgID, Body: *stored, CreatedAt: *at}}
		default:
			rows.Close()
			return fmt.Errorf("write %d messages: outcome %d of send %d is incomplete", len(reqs), status, i)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("write %d messages: %w", len(reqs), err)
	}
	if i != len(reqs) {
		return fmt.Errorf("write %d messages: %d outcomes", len(reqs), i)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit %d messages: %w", len(reqs), err)
	}
	if tag.String() != "COMMIT" {
		// COMMIT of a transaction that failed answers ROLLBACK.
		return fmt.Errorf("commit %d messages: transaction rolled back", len(reqs))
	}
	return nil
}
