package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

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

// insertOutbox writes events, in order, in tx. One statement however many
// events, so a group created with a thousand members costs one round trip.
func insertOutbox(ctx context.Context, tx pgx.Tx, evs ...chat.Event) error {
	if len(evs) == 0 {
		return nil
	}
	keys := make([]string, len(evs))
	payloads := make([]string, len(evs))
	for i, ev := range evs {
		r, err := newOutboxRow(ev)
		if err != nil {
			return err
		}
		keys[i], payloads[i] = r.key, r.payload
	}
	// ORDER BY ord makes the outbox ids follow the events' order.
	_, err := tx.Exec(ctx, `
		INSERT INTO outbox (msg_key, payload)
		SELECT k, p::jsonb FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(k, p, ord)
		ORDER BY ord`, keys, payloads)
	if err != nil {
		return fmt.Errorf("insert outbox: %w", err)
	}
	return nil
}
