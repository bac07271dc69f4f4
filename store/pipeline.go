package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/chatd/chatd/internal/pgerr"
)

// keyLookupTxSQL starts a hot write transaction (a delivered batch):
// deferred relay wake-up, and plans pinned to nested loops over primary-key
// lookups. Every statement of such a batch looks rows up by key for each
// element of a small array; should its plans be cached (a pool or database
// URL that asks for cached plans), these settings keep a plan made on a
// fresh, unanalyzed database from being a sequential scan or hash join that
// stays wrong as the tables grow. Send batches are a call of
// chat_send_batch, which caches its own plans and keeps them on the indexes
// by the shape of its queries.
const keyLookupTxSQL = `SELECT set_config('chat.defer_notify', 'on', true),
	set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true)`

// pipelineTx runs the statements queue adds as one transaction in a single
// round trip: BEGIN, the statements, COMMIT, and the deferred relay wake-up
// if one is needed (WithRelayWake; callers silence the outbox trigger with
// keyLookupTxSQL or deferNotifySQL). Results are discarded; the first error
// fails it all.
func (s *Store) pipelineTx(ctx context.Context, op string, queue func(b *pgx.Batch)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(op, fmt.Errorf("acquire connection: %w", err))
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	queue(b)
	b.Queue("COMMIT")
	commitAt := b.Len()
	if s.relayWakeNeeded() {
		b.Queue(notifyOutboxSQL)
	}
	br := conn.Conn().SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for i := 0; i < commitAt; i++ {
		if tag, err = br.Exec(); err != nil {
			if pgerr.AnswerLost(err) {
				// PostgreSQL said nothing: the COMMIT may have gone through.
				err = fmt.Errorf("%w: %w", errMaybeCommitted, err)
			}
			break
		}
	}
	if err == nil && tag.String() != "COMMIT" {
		err = errors.New("transaction rolled back")
	}
	_ = br.Close() // a failed wake-up after COMMIT only delays the relay
	if err != nil {
		endOpenTx(conn.Conn())
		return classify(op, err)
	}
	return nil
}

// errMaybeCommitted marks a pipelineTx failure that may hide a commit:
// the pipeline went out and no answer of PostgreSQL's came back
// (pgerr.AnswerLost).
var errMaybeCommitted = errors.New("the answer to the pipeline's COMMIT was lost")

// endOpenTx rolls back what a failed pipeline left open on conn (a
// failed statement leaves its transaction open and aborted), so its locks
// go now. If even that fails, the pool sees the open transaction on
// release and discards the connection.
func endOpenTx(conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK")
}
