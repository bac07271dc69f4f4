package push

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DecideInTx runs one decision of ids in the caller's transaction and
// returns the number of jobs it wrote or merged.
func DecideInTx(ctx context.Context, p *Pusher, tx pgx.Tx, ids []int64) (int, error) {
	_, d, err := p.decideTx(ctx, tx, ids, new(string))
	return d.jobs, err
}

// ClaimInTx claims up to n due pushes in the caller's transaction, as a
// node's claimer does, and returns their ids.
func ClaimInTx(ctx context.Context, p *Pusher, tx pgx.Tx, n int) ([]int64, error) {
	jobs, _, err := p.claimInTx(ctx, tx, n, time.Minute, new(string))
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	return ids, err
}

// Claim is one claim of a push, as the node that made it knows it.
type Claim struct{ j *job }

// ID is the claimed push's.
func (c Claim) ID() int64 { return c.j.id }

// User is the claimed push's recipient.
func (c Claim) User() int64 { return c.j.user }

// ClaimsInTx claims up to n due pushes for lease in the caller's
// transaction, as a node's claimer does.
func ClaimsInTx(ctx context.Context, p *Pusher, tx pgx.Tx, n int, lease time.Duration) ([]Claim, error) {
	jobs, _, err := p.claimInTx(ctx, tx, n, lease, new(string))
	out := make([]Claim, len(jobs))
	for i, j := range jobs {
		out[i] = Claim{j}
	}
	return out, err
}

// WriteResult writes what a node's result writer writes for claim c:
// outcome "retry" (its device d owed again), "uncounted retry" (the same,
// the send cancelled by a stopping node), "shown" (sent to a device),
// "skipped" (not needed any more), "release" (handed back unsent by a
// stopping node) or "done" (nothing more to send).
func WriteResult(ctx context.Context, p *Pusher, c Claim, outcome string, d int64) error {
	return WriteResults(ctx, p, Outcome{c, outcome, d})
}

// Outcome is one claim's outcome, as WriteResult takes it.
type Outcome struct {
	Claim   Claim
	Outcome string
	Device  int64
}

// WriteResults writes the outcomes in one batch, as the result writer
// does with those that came back together.
func WriteResults(ctx context.Context, p *Pusher, os ...Outcome) error {
	rs := make([]result, len(os))
	for i, o := range os {
		r, err := o.result()
		if err != nil {
			return err
		}
		rs[i] = r
	}
	return p.applyResults(ctx, rs)
}

func (o Outcome) result() (result, error) {
	c, d := o.Claim, o.Device
	r := result{id: c.j.id, attempts: c.j.attempts, claims: c.j.claims}
	switch o.Outcome {
	case "retry":
		r.retry = []int64{d}
	case "uncounted retry":
		r.retry, r.uncount = []int64{d}, true
	case "shown":
		r.shown = true
	case "skipped":
		r.skipped = true
	case "release":
		r = handBack(c.j)
	case "done":
	default:
		return r, fmt.Errorf("unknown outcome %q", o.Outcome)
	}
	return r, nil
}

// DecideBatch decides ids on the decider's session conn as the leading
// node does, in one transaction.
func DecideBatch(ctx context.Context, p *Pusher, conn *pgx.Conn, ids []int64) error {
	return p.decideBatch(ctx, conn, ids)
}

// Connect opens the decider's dedicated session as Run does.
func Connect(ctx context.Context, p *Pusher) (*pgx.Conn, error) { return p.connect(ctx) }

// MarkStarted marks claim c's send started, as a node does right before
// its first request goes out (startSQL).
func MarkStarted(ctx context.Context, p *Pusher, c Claim) error {
	ok, err := p.markStarted(ctx, c.j)
	if err == nil && !ok {
		err = fmt.Errorf("claim %d of push %d is over", c.j.claims, c.j.id)
	}
	return err
}

// The statements a claim and a first send run, for measuring them.
const (
	ClaimLockSQL     = claimLockSQL
	TakeBackSQL      = takeBackSQL
	LockUnstartedSQL = lockUnstartedSQL
	StartSQL         = startSQL
	AnyDueSQL        = anyDueSQL
	OverflowSQL      = overflowSQL
)
