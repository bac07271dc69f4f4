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

// WriteResult writes what a node's result writer writes for attempt
// attempts of job id: outcome "retry" (its device d owed again), "shown"
// (sent to a device) or "done" (nothing more to send).
func WriteResult(ctx context.Context, p *Pusher, id int64, attempts int, outcome string, d int64) error {
	r := result{id: id, attempts: attempts}
	switch outcome {
	case "retry":
		r.retry = []int64{d}
	case "shown":
		r.shown = true
	}
	return p.applyResults(ctx, []result{r})
}
