package push_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestResultsWrittenWhileARecallLocksTheirNotificationsAreNotLost: a
// group message was pushed to three members (notifications z < a < b)
// and is recalled as their outcomes come back together with another
// conversation's (d): the writer locks z (a retry), then d (done), then b
// (shown); the recall's decision locks the group's notifications newest
// first, b, a, then z. PostgreSQL aborts one of the two as a deadlock:
// the aborted one must run again, not leave its work undone (the outcomes
// unwritten: b sent again when its lease runs out; the decider's lease
// dropped). The test holds a row (a, or d) so that the two meet, either
// one waiting first; which one PostgreSQL aborts depends on when each
// began to wait (its deadlock_timeout runs out first).
func TestResultsWrittenWhileARecallLocksTheirNotificationsAreNotLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		hold         func(z, a, b, d push.Claim) push.Claim
		decidesFirst bool
	}{
		// The decision waits for a (held) with b locked, the writer for b
		// with z locked; a let go, the decision waits for z.
		{"the decision waits first", func(_, a, _, _ push.Claim) push.Claim { return a }, true},
		// The writer waits for d (held) with z locked, the decision for z
		// with b locked; d let go, the writer waits for b.
		{"the writer waits first", func(_, _, _, d push.Claim) push.Claim { return d }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t)
			r.cfg.Delay, r.cfg.MinInterval = 0, 0
			devs := map[int64]int64{}
			for _, u := range []int64{2, 3, 4, 5} {
				devs[u] = r.subscribe(u, "user"+strconv.FormatInt(u, 10))
			}
			g, other := r.group(1, 2, 3, 4), r.direct(1, 5)
			seq := r.send(g, 1, "oops, wrong group")
			r.send(other, 1, "hi")
			p := r.pusher()
			r.decideAll(p, []int64{g, other}, 4)
			cs := r.claims(p, 10, time.Minute)
			if len(cs) != 4 {
				t.Fatalf("claimed %d pushes, want the four members'\n%s", len(cs), dumpJobs(r))
			}
			i := slices.IndexFunc(cs, func(c push.Claim) bool { return c.User() == 5 })
			d := cs[i]
			cs = slices.Delete(cs, i, i+1)
			slices.SortFunc(cs, func(x, y push.Claim) int { return int(x.ID() - y.ID()) })
			z, a, b := cs[0], cs[1], cs[2]
			r.recall(g, 1, seq)

			hold, err := r.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = hold.Rollback(context.Background()) }()
			if _, err := hold.Exec(ctx, `SELECT 1 FROM push_job WHERE id = $1 FOR UPDATE`, tc.hold(z, a, b, d).ID()); err != nil {
				t.Fatal(err)
			}
			conn, err := push.Connect(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			decide := func() (struct{}, error) { return struct{}{}, push.DecideBatch(ctx, p, conn, []int64{g}) }
			write := func() (struct{}, error) {
				return struct{}{}, push.WriteResults(ctx, p,
					push.Outcome{Claim: z, Outcome: "retry", Device: devs[z.User()]},
					push.Outcome{Claim: d, Outcome: "done"},
					push.Outcome{Claim: b, Outcome: "shown"})
			}
			waiting := func(n int64) func() bool { return func() bool { return pgtest.LockWaiters(t, r.pool) == n } }
			var decided, written *testkit.Pending[struct{}]
			if tc.decidesFirst {
				decided = testkit.Start(t, "the recall's decision", decide, waiting(1))
				written = testkit.Start(t, "the outcomes", write, waiting(2))
			} else {
				written = testkit.Start(t, "the outcomes", write, waiting(1))
				decided = testkit.Start(t, "the recall's decision", decide, waiting(2))
			}
			if err := hold.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := written.Wait(); err != nil {
				t.Errorf("writing the outcomes: %v", err)
			}
			if _, err := decided.Wait(); err != nil {
				t.Errorf("the recall's decision: %v", err)
			}
			if n := r.count(`SELECT count(*) FROM push_job WHERE id = $1 AND state = 'sent'`, b.ID()); n != 1 {
				t.Errorf("the shown push %d is not recorded as sent\n%s", b.ID(), dumpJobs(r))
			}
			if n := r.count(`SELECT count(*) FROM push_job WHERE kind = 'remove' AND user_id = $1`, b.User()); n != 1 {
				t.Errorf("%d removes for user %d, whose push showed the recalled message, want 1\n%s", n, b.User(), dumpJobs(r))
			}
		})
	}
}
