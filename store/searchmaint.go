package store

import (
	"context"
	"log/slog"
	"time"
)

// The search indexes are GIN indexes with fast update on: a new message's
// lexemes and trigrams go to the index's pending list, a cheap append,
// and are merged into the index proper later. PostgreSQL merges when a
// pending list outgrows gin_pending_list_limit, in whichever transaction
// inserts past it: a group-commit batch, holding its conversations' locks
// for the hundreds of milliseconds a merge takes. The search maintainer
// merges them every interval instead, in a connection of its own, so the
// send path appends and never merges (an insert that finds the merge lock
// taken skips the merge). Migration 0019 gives both indexes a 16 MB pending
// list, seconds of sends at full speed between two runs of it.

// searchIndexes are merged by CleanSearchIndexes.
var searchIndexes = []string{"message_search_idx", "message_body_trgm_idx"}

// CleanSearchIndexes merges the search indexes' pending lists and returns
// how many pending pages it merged.
func (s *Store) CleanSearchIndexes(ctx context.Context) (int64, error) {
	var total int64
	for _, idx := range searchIndexes {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT gin_clean_pending_list($1::regclass)`, idx).Scan(&n); err != nil {
			return total, classify("merge search index "+idx, err)
		}
		total += n
	}
	return total, nil
}

// RunSearchMaintenance merges the search indexes' pending lists every
// interval until ctx ends. Every node may run it: a merge that another one
// is running already is skipped. A failure (the database down, or a role
// that does not own the indexes and may not merge them: autovacuum and the
// inserts then do) is logged once until a merge works again.
func (s *Store) RunSearchMaintenance(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, max(interval*10, 30*time.Second))
		_, err := s.CleanSearchIndexes(cctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			log.Warn("merging the search indexes' pending lists failed; inserts and autovacuum merge them meanwhile", "err", err)
		case err == nil && failing:
			failing = false
			log.Info("merging the search indexes' pending lists works again")
		}
	}
}
