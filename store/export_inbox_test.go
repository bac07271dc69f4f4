package store

import (
	"context"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ExplainInbox returns PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) of the
// statement Inbox runs for userID's first page of limit conversations.
func (s *Store) ExplainInbox(ctx context.Context, userID int64, limit int) (string, error) {
	var plan []string
	err := s.runTx(ctx, "explain inbox", readOnly(), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+inboxSQL, userID,
			pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}, int64(math.MaxInt64), limit+1)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return strings.Join(plan, "\n"), err
}
