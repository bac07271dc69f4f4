package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// DeliveredBatchSQL lets tests hold a delivered-watermark flush's
// statement open in a transaction of their own.
const DeliveredBatchSQL = deliveredBatchSQL

// LockMembersSQL lets tests hold a read-receipt batch's member locks in a
// transaction of their own, partway through when another holds a row.
const LockMembersSQL = lockMembersSQL

// SearchByScan is the plan Search picks for text and a caller who sees
// visible messages: true for the direct scan, false for the indexes.
func (s *Store) SearchByScan(ctx context.Context, terms []chat.SearchTerm, visible int64) (scan bool, err error) {
	err = s.runTx(ctx, "search plan", readOnly(), func(tx pgx.Tx) error {
		scan = s.searchByScan(ctx, tx, terms, visible)
		return nil
	})
	return scan, err
}

// SetWatchCheck makes Watch check its connection after d without a
// notice, and give it d to answer; before Watch starts.
func (s *Sessions) SetWatchCheck(d time.Duration) { s.watchCheck = d }
