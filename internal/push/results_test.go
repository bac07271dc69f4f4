package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
)

// TestALateResultOfAnEarlierAttemptLeavesTheNewerClaimAlone: a node's
// result came back after its claim's lease ran out, and another node has
// claimed the push again meanwhile (attempts moved on). Whatever the late
// result says, it must not end, reschedule or release the newer claim's
// push: a third claim would send it once more, or a push still owed would
// be forgotten.
func TestALateResultOfAnEarlierAttemptLeavesTheNewerClaimAlone(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	dev := r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "hi bob")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM message WHERE conversation_id = $1 AND seq = $2
AND created_at <= now() - interval '400 milliseconds'`, conv, seq)
	p, err := push.New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.decide(ctx, p, conv); err != nil || n != 1 {
		t.Fatalf("decided %d jobs (%v), want 1", n, err)
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := push.ClaimInTx(ctx, p, tx, 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("claimed %v (%v), want bob's push", ids, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Its lease ran out and another node claimed it, as the claim does.
	if _, err := r.pool.Exec(ctx, `UPDATE push_job SET attempts = attempts + 1, lease_until = now() + interval '1 minute'
WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []string{"retry", "shown", "done"} {
		if err := push.WriteResult(ctx, p, ids[0], 1, outcome, dev); err != nil {
			t.Fatal(err)
		}
		var (
			attempts int
			state    string
			leased   bool
		)
		err := r.pool.QueryRow(ctx, `SELECT attempts, state, lease_until IS NOT NULL AND lease_until > now() FROM push_job WHERE id = $1`, ids[0]).
			Scan(&attempts, &state, &leased)
		if err != nil {
			t.Fatalf("after the first attempt's late %q result: bob's push: %v", outcome, err)
		}
		if attempts != 2 || state != "sending" || !leased {
			t.Fatalf("after the first attempt's late %q result: attempts %d, state %s, leased %v; want the newer claim's (2, sending, true)",
				outcome, attempts, state, leased)
		}
	}
}
