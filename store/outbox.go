package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// outboxRow is one outbox row ready to insert.
type outboxRow struct {
	key     string // the conversation id: keyed consumers see a conversation in order
	payload string // JSON of a chat.Event
}

func newOutboxRow(ev chat.Event) (outboxRow, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return outboxRow{}, fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	return outboxRow{key: strconv.FormatInt(ev.ConversationID, 10), payload: string(b)}, nil
}

// insertOutboxSQL inserts outbox rows from parallel arrays of keys and
// payloads. ORDER BY ord makes the outbox ids follow the events' order.
const insertOutboxSQL = `
		INSERT INTO outbox (msg_key, payload)
		SELECT k, p::jsonb FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(k, p, ord)
		ORDER BY ord`

type outboxBatch struct{ keys, payloads []string }

func outboxArgs(evs []chat.Event) (outboxBatch, error) {
	ob := outboxBatch{keys: make([]string, len(evs)), payloads: make([]string, len(evs))}
	for i, ev := range evs {
		r, err := newOutboxRow(ev)
		if err != nil {
			return outboxBatch{}, err
		}
		ob.keys[i], ob.payloads[i] = r.key, r.payload
	}
	return ob, nil
}

// insertOutbox writes events, in order, in tx. One statement however many
// events, so a group created with a thousand members costs one round trip.
func insertOutbox(ctx context.Context, tx pgx.Tx, evs ...chat.Event) error {
	if len(evs) == 0 {
		return nil
	}
	ob, err := outboxArgs(evs)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, insertOutboxSQL, ob.keys, ob.payloads); err != nil {
		return fmt.Errorf("insert outbox: %w", err)
	}
	return nil
}

// Hot write paths wake the outbox relay after COMMIT rather than from the
// outbox trigger inside their transaction (migration 0006 says why):
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
