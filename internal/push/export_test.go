package push

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// DecideInTx runs one decision of ids in the caller's transaction and
// returns the number of jobs it wrote or merged.
func DecideInTx(ctx context.Context, p *Pusher, tx pgx.Tx, ids []int64) (int, error) {
	_, jobs, _, err := p.decideTx(ctx, tx, ids)
	return jobs, err
}

// ClaimInTx claims up to n due pushes in the caller's transaction, as a
// node's claimer does, and returns their ids.
func ClaimInTx(ctx context.Context, p *Pusher, tx pgx.Tx, n int) ([]int64, error) {
	jobs, err := p.claimInTx(ctx, tx, n, time.Minute)
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	return ids, err
}
