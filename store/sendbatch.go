package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	chat "github.com/chatd/chatd"
)

// commitBatch commits a batch of sends in one transaction with set-based SQL
// and four round trips whatever the batch size: BEGIN; lock the batch's
// conversations in id order (so concurrent batches never deadlock) and, in
// the same pipeline after the locks, read memberships and already-used
// clientMsgIds; write messages, last_seq, sender watermarks and outbox rows
// in one pipeline; COMMIT.
//
// Each request gets its own outcome: a duplicate, a non-member or an unknown
// conversation fails (or answers) alone while the rest commit. Within a
// conversation seqs follow the batch's order, which is arrival order.
// It returns an error only for a failure of the whole transaction.
func (s *Store) commitBatch(ctx context.Context, reqs []*sendReq) error {
	convIDs := make([]int64, 0, len(reqs))
	seen := map[int64]bool{}
	pairConv := make([]int64, len(reqs))
	pairUser := make([]int64, len(reqs))
	pairID := make([]string, len(reqs))
	for i, r := range reqs {
		if !seen[r.req.ConversationID] {
			seen[r.req.ConversationID] = true
			convIDs = append(convIDs, r.req.ConversationID)
		}
		pairConv[i], pairUser[i], pairID[i] = r.req.ConversationID, r.req.SenderID, r.req.ClientMsgID
	}
	slices.Sort(convIDs) // the lock order
	pool := s.pool
	if s.sendPool != nil {
		pool = s.sendPool
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return classify("send", fmt.Errorf("acquire connection: %w", err))
	}
	defer conn.Release()
	if err := pipelinedBatch(ctx, conn.Conn(), reqs, convIDs, pairConv, pairUser, pairID); err != nil {
		endOpenTx(conn.Conn())
		return classify("send", err)
	}
	return nil
}

// pipelinedBatch runs the batch transaction in two round trips: BEGIN and
// the reads in one pipeline, the writes and COMMIT in another. Each round
// trip is a wake-up of PostgreSQL and of this process; on a busy machine
// those, not the SQL, dominate a small batch's latency.
func pipelinedBatch(ctx context.Context, tx *pgx.Conn, reqs []*sendReq, convIDs, pairConv, pairUser []int64, pairID []string) error {
	{
		type convState struct {
			lastSeq int64
			newLast int64
		}
		convs := map[int64]*convState{}
		type memberKey struct{ conv, user int64 }
		members := map[memberKey]bool{}
		type idKey struct {
			conv int64
			id   string
		}
		type stored struct {
			seq, sender int64
			body        string
			at          time.Time
		}
		existing := map[idKey]stored{}
		var now time.Time

		b := &pgx.Batch{}
		b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
		b.Queue(keyLookupTxSQL)
		// Lateral lookups with LIMIT keep PostgreSQL on the primary keys
		// whatever its statistics say (a fresh database has none); the
		// conversation ids are sorted, so rows are locked in id order.
		b.Queue(`SELECT c.id, c.last_seq, GREATEST(clock_timestamp(), c.last_message_at)
			FROM unnest($1::bigint[]) WITH ORDINALITY AS k(id, ord)
			CROSS JOIN LATERAL (SELECT id, last_seq, last_message_at FROM conversation WHERE id = k.id LIMIT 1 FOR UPDATE) c
			ORDER BY k.ord`, convIDs)
		b.Queue(`SELECT m.conversation_id, m.user_id FROM conversation_member m
			JOIN unnest($1::bigint[], $2::bigint[]) AS p(c, u) ON m.conversation_id = p.c AND m.user_id = p.u`, pairConv, pairUser)
		b.Queue(`SELECT m.conversation_id, m.client_msg_id::text, m.seq, m.sender_id, m.body, m.created_at FROM message m
			JOIN unnest($1::bigint[], $2::uuid[]) AS p(c, id) ON m.conversation_id = p.c AND m.client_msg_id = p.id`, pairConv, pairID)
		br := tx.SendBatch(ctx, b)
		for range 2 {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return fmt.Errorf("begin: %w", err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("lock conversations: %w", err)
		}
		for rows.Next() {
			var id, last int64
			var at time.Time
			if err := rows.Scan(&id, &last, &at); err != nil {
				rows.Close()
				_ = br.Close()
				return fmt.Errorf("lock conversations: %w", err)
			}
			convs[id] = &convState{lastSeq: last, newLast: last}
			if at.After(now) {
				now = at
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return fmt.Errorf("lock conversations: %w", err)
		}
		if rows, err = br.Query(); err != nil {
			_ = br.Close()
			return fmt.Errorf("check memberships: %w", err)
		}
		for rows.Next() {
			var k memberKey
			if err := rows.Scan(&k.conv, &k.user); err != nil {
				rows.Close()
				_ = br.Close()
				return fmt.Errorf("check memberships: %w", err)
			}
			members[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return fmt.Errorf("check memberships: %w", err)
		}
		if rows, err = br.Query(); err != nil {
			_ = br.Close()
			return fmt.Errorf("check clientMsgIds: %w", err)
		}
		for rows.Next() {
			var k idKey
			var st stored
			if err := rows.Scan(&k.conv, &k.id, &st.seq, &st.sender, &st.body, &st.at); err != nil {
				rows.Close()
				_ = br.Close()
				return fmt.Errorf("check clientMsgIds: %w", err)
			}
			existing[k] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return fmt.Errorf("check clientMsgIds: %w", err)
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("read batch state: %w", err)
		}

		// Decide every request's outcome in arrival order.
		var (
			mConv, mSeq, mSender []int64
			mID, mBody           []string
			oKey, oPayload       []string
			wConv, wUser, wSeq   []int64
		)
		for _, r := range reqs {
			q := r.req
			cs := convs[q.ConversationID]
			if cs == nil {
				r.err = errNoConversation(q.ConversationID)
				continue
			}
			if !members[memberKey{q.ConversationID, q.SenderID}] {
				r.err = errNotMember(q.ConversationID)
				continue
			}
			if st, ok := existing[idKey{q.ConversationID, q.ClientMsgID}]; ok {
				if st.sender != q.SenderID {
					r.err = chat.Errorf(chat.CodeConflict, "clientMsgId %s is already used in this conversation by another sender", q.ClientMsgID)
					continue
				}
				r.res = chat.SendResult{Duplicate: true, Message: chat.Message{ConversationID: q.ConversationID, Seq: st.seq,
					SenderID: st.sender, ClientMsgID: q.ClientMsgID, Body: st.body, CreatedAt: st.at}}
				continue
			}
			cs.newLast++
			msg := chat.Message{ConversationID: q.ConversationID, Seq: cs.newLast, SenderID: q.SenderID,
				ClientMsgID: q.ClientMsgID, Body: q.Body, CreatedAt: now}
			row, err := newOutboxRow(chat.MessageEvent(msg))
			if err != nil {
				cs.newLast--
				r.err = err
				continue
			}
			// A later request in this batch with the same clientMsgId is
			// a duplicate of this one.
			existing[idKey{q.ConversationID, q.ClientMsgID}] = stored{seq: msg.Seq, sender: msg.SenderID, body: msg.Body, at: now}
			r.res = chat.SendResult{Message: msg}
			mConv, mSeq, mSender = append(mConv, msg.ConversationID), append(mSeq, msg.Seq), append(mSender, msg.SenderID)
			mID, mBody = append(mID, msg.ClientMsgID), append(mBody, msg.Body)
			oKey, oPayload = append(oKey, row.key), append(oPayload, row.payload)
			wConv, wUser, wSeq = append(wConv, msg.ConversationID), append(wUser, msg.SenderID), append(wSeq, msg.Seq)
		}
		if len(mConv) == 0 {
			if _, err := tx.Exec(ctx, "ROLLBACK"); err != nil {
				return fmt.Errorf("end read-only batch: %w", err)
			}
			return nil
		}
		var uConv, uLast []int64
		for _, id := range convIDs {
			if cs := convs[id]; cs != nil && cs.newLast > cs.lastSeq {
				uConv, uLast = append(uConv, id), append(uLast, cs.newLast)
			}
		}
		wb := &pgx.Batch{}
		wb.Queue(`INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at)
			SELECT c, q, s, i::uuid, b, $6 FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS t(c, q, s, i, b)`,
			mConv, mSeq, mSender, mID, mBody, now)
		wb.Queue(`UPDATE conversation c SET last_seq = u.last, last_message_at = $3
			FROM unnest($1::bigint[], $2::bigint[]) AS u(id, last) WHERE c.id = u.id`, uConv, uLast, now)
		// The sender has read what it wrote; one row per (conversation,
		// sender) with its highest seq. The member rows are locked first in
		// key order, the order every writer of member rows uses (receipt
		// and delivered-watermark batches), so batches never deadlock.
		wb.Queue(`SELECT 1 FROM (SELECT DISTINCT c, u FROM unnest($1::bigint[], $2::bigint[]) AS t(c, u) ORDER BY c, u) w
			CROSS JOIN LATERAL (SELECT 1 FROM conversation_member m WHERE m.conversation_id = w.c AND m.user_id = w.u
				LIMIT 1 FOR UPDATE) l`, wConv, wUser)
		wb.Queue(`UPDATE conversation_member m SET last_read_seq = GREATEST(m.last_read_seq, w.seq)
			FROM (SELECT c, u, max(q) AS seq FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS t(c, u, q) GROUP BY c, u) w
			WHERE m.conversation_id = w.c AND m.user_id = w.u`, wConv, wUser, wSeq)
		wb.Queue(`INSERT INTO outbox (msg_key, payload)
			SELECT k, p::jsonb FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(k, p, ord) ORDER BY ord`, oKey, oPayload)
		wb.Queue(`COMMIT`)
		commitAt := wb.Len()
		wb.Queue(notifyOutboxSQL)
		wr := tx.SendBatch(ctx, wb)
		var tag pgconn.CommandTag
		for i := 0; i < commitAt; i++ {
			if tag, err = wr.Exec(); err != nil {
				_ = wr.Close()
				return fmt.Errorf("write %d messages: %w", len(mConv), err)
			}
		}
		if tag.String() != "COMMIT" {
			// COMMIT of a transaction that failed answers ROLLBACK.
			_ = wr.Close()
			return fmt.Errorf("commit %d messages: transaction rolled back", len(mConv))
		}
		// Committed. A failed wake-up only delays the relay until its
		// poll; the sends succeeded.
		_ = wr.Close()
		return nil
	}
}

// sendReq is one queued send and, once its batch is done, its outcome.
type sendReq struct {
	// taken is set by the flusher before it looks at ctx: a caller whose
	// ctx ends after that waits for the real outcome instead of guessing.
	taken atomic.Bool
	ctx   context.Context
	req   chat.SendRequest
	res   chat.SendResult
	err   error
	done  chan struct{}
}

// batcher gathers sends that arrive while transactions are in flight and
// commits them together. Flushers take whatever is queued when they become
// free, so an idle server commits a lone send at once (a batch of one) and a
// busy one commits many per transaction.
//
// Each flusher owns the conversations whose id falls in its share (id mod
// flushers) and has a queue of its own: two concurrent batches never want
// the same conversation row, so they never wait for each other's commit
// (measured: with one shared queue most of a batch's time went to lock waits
// on rows another batch held through its fsync). A conversation's sends
// stay in arrival order in one queue.
type batcher struct {
	s        *Store
	queues   []chan *sendReq
	maxBatch int
	stop     chan struct{}
	done     chan struct{}
}

func newBatcher(s *Store) *batcher {
	b := &batcher{s: s, maxBatch: s.maxBatch, stop: make(chan struct{}), done: make(chan struct{})}
	n := max(1, s.flushers)
	per := max(1024, 8192/n)
	for i := 0; i < n; i++ {
		b.queues = append(b.queues, make(chan *sendReq, per))
	}
	return b
}

func (b *batcher) queueOf(conversationID int64) chan *sendReq {
	i := conversationID % int64(len(b.queues))
	if i < 0 {
		i = -i
	}
	return b.queues[i]
}

// BatchStats counts batch commits for tests and metrics.
type BatchStats struct {
	Batches  int64 // transactions
	Messages int64 // requests processed
	Queued   int   // waiting for a flusher now
}

func (b *batcher) run() {
	defer close(b.done)
	finished := make(chan struct{}, len(b.queues))
	for _, q := range b.queues {
		go func() {
			defer func() { finished <- struct{}{} }()
			batch := make([]*sendReq, 0, b.maxBatch)
			for {
				batch = batch[:0]
				select {
				case r := <-q:
					batch = append(batch, r)
				case <-b.stop:
					return
				}
			gather:
				for len(batch) < b.maxBatch {
					select {
					case r := <-q:
						batch = append(batch, r)
					default:
						break gather
					}
				}
				b.s.flush(batch)
			}
		}()
	}
	for range b.queues {
		<-finished
	}
}

// flush commits a batch and wakes its callers. Requests whose caller gave up
// before the batch started are skipped. A failure of the whole transaction
// other than unavailability (a bug or a value PostgreSQL rejects) is retried
// one request at a time so the bad one fails alone.
func (s *Store) flush(batch []*sendReq) {
	live := batch[:0]
	deadline := time.Now().Add(s.batchTimeout)
	for _, r := range batch {
		r.taken.Store(true)
		if err := r.ctx.Err(); err != nil {
			r.err = chat.Unavailable("send", err)
			close(r.done)
			continue
		}
		if d, ok := r.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The batch must not outlive its most impatient caller: a send that
	// was answered "unavailable" must not commit afterwards.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := s.commitBatch(ctx, live)
	s.batchCount.Add(1)
	s.batchMsgs.Add(int64(len(live)))
	if err != nil && len(live) > 1 && !errors.Is(err, chat.ErrUnavailable) {
		for _, r := range live {
			r.res, r.err = chat.SendResult{}, nil
			if e := s.commitBatch(ctx, []*sendReq{r}); e != nil {
				r.err = e
			} else if s.onCommit != nil {
				s.notifyCommitted([]*sendReq{r})
			}
			s.batchCount.Add(1)
			close(r.done)
		}
		return
	}
	if err == nil && s.onCommit != nil {
		s.notifyCommitted(live)
	}
	for _, r := range live {
		if err != nil {
			r.res, r.err = chat.SendResult{}, err
		}
		close(r.done)
	}
}

// notifyCommitted hands the batch's new messages to the commit hook in seq
// order per conversation (the batch assigned seqs in its own order).
func (s *Store) notifyCommitted(batch []*sendReq) {
	for _, r := range batch {
		if r.err == nil && !r.res.Duplicate {
			s.onCommit(chat.MessageEvent(r.res.Message))
			r.res.Notified = true
		}
	}
}
