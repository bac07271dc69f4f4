package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// ExplainSearch returns PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) of the
// statement Search runs for the page of q (its Terms parsed) after
// q.Cursor (none: the first page).
func (s *Store) ExplainSearch(ctx context.Context, q chat.SearchQuery) (string, error) {
	cur, err := q.DecodeCursor()
	if err != nil {
		return "", err
	}
	var plan []string
	err = s.runTx(ctx, "explain search", readOnly(), func(tx pgx.Tx) error {
		sql, args, _, err := s.searchStatement(ctx, tx, q, cur)
		if err != nil || sql == "" {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
		if err != nil {
			return fmt.Errorf("explain search: %w", err)
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return strings.Join(plan, "\n"), err
}

// BreakSearchStatistics makes s's statistics query fail (as a timeout or
// a permission would), the next time it is read.
func (s *Store) BreakSearchStatistics() {
	s.searchStats.mu.Lock()
	defer s.searchStats.mu.Unlock()
	s.searchStats.query, s.searchStats.freq = "SELECT 1/0", nil
}
