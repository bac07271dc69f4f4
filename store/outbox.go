package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// Outbox rows of stream entries (message.new) reference the entry and
// carry no payload (chat_send_batch writes them); every other event's row
// carries its JSON, encoded here by chat.EncodeEvent, the one encoder of
// event JSON. Every row is keyed by its conversation id, so a keyed
// consumer sees one conversation's events in commit order. A write
// inserts its rows last, under the lock that orders its key's changes
// (the conversation row's; a profile's, lockProfile): the relay reads
// in id order without waiting for ids still in flight, which is commit
// order only among rows whose ids were taken under one lock.

// insertOutboxSQL inserts outbox rows from parallel arrays of keys, types
// and payloads, all with the trace context $4, $5 (NULL: not traced),
// while outbox rows are wanted (a relay may read them: functions.sql,
// chat_want_outbox), read by this statement in the writing transaction.
// ORDER BY ord makes the outbox ids follow the events' order.
const insertOutboxSQL = `
		INSERT INTO outbox (msg_key, type, payload, traceparent, tracestate)
		SELECT k, t, p::jsonb, $4::text, $5::text FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS e(k, t, p, ord)
		WHERE EXISTS (SELECT 1 FROM outbox_wanted)
		ORDER BY ord`

type outboxBatch struct{ keys, types, payloads []string }

func outboxArgs(evs []chat.Event) (outboxBatch, error) {
	ob := outboxBatch{keys: make([]string, len(evs)), types: make([]string, len(evs)), payloads: make([]string, len(evs))}
	for i, ev := range evs {
		b, err := chat.EncodeEvent(ev)
		if err != nil {
			return outboxBatch{}, err
		}
		ob.keys[i], ob.types[i], ob.payloads[i] = strconv.FormatInt(ev.ConversationID, 10), ev.Type, string(b)
	}
	return ob, nil
}

// insertOutbox writes events, in order, in tx, with the trace context tc
// (empty: none). One statement however many events, so a group created
// with a thousand members costs one round trip.
func insertOutbox(ctx context.Context, tx pgx.Tx, tc chat.TraceContext, evs ...chat.Event) error {
	if len(evs) == 0 {
		return nil
	}
	ob, err := outboxArgs(evs)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, insertOutboxSQL, ob.keys, ob.types, ob.payloads, nullIfEmpty(tc.Parent), nullIfEmpty(tc.State)); err != nil {
		return fmt.Errorf("insert outbox: %w", err)
	}
	return nil
}

// nullIfEmpty is s as a nullable text argument.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Hot write paths wake the outbox relay after COMMIT rather than from the
// outbox trigger inside their transaction (functions.sql, chat_outbox_notify, says why):
// deferNotifySQL, first in the transaction, silences the trigger;
// notifyOutboxSQL, in a transaction of its own after COMMIT, wakes the
// relay of whichever node leads it.
const (
	deferNotifySQL  = `SELECT set_config('chat.defer_notify', 'on', true)`
	notifyOutboxSQL = `SELECT pg_notify('chat_outbox', '')`
)

// wakeRelay sends the deferred wake-up after a commit, if a relay needs one
// (WithRelayWake, asked again: the lease may have moved since the batcher
// asked). Failure only delays the relay until its poll.
func (s *Store) wakeRelay() {
	if !s.relayWakeNeeded() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, notifyOutboxSQL)
}

// relayWakeNeeded says whether a commit that wrote outbox rows must NOTIFY
// (WithRelayWake).
func (s *Store) relayWakeNeeded() bool {
	return s.relayWake == nil || s.relayWake()
}
