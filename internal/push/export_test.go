package push

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// DecideInTx runs one decision of ids in the caller's transaction and
// returns the number of jobs it wrote or merged.
func DecideInTx(ctx context.Context, p *Pusher, tx pgx.Tx, ids []int64) (int, error) {
	_, jobs, _, err := p.decideTx(ctx, tx, ids)
	return jobs, err
}
