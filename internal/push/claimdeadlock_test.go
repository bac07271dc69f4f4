package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAClaimAbortedAsADeadlockWithARecallsDecisionIsMadeAgainAtOnce: bob's
// notification of "one" was claimed and a stopping node cut its send
// short before any answer (no attempt: claimed again, it records the
// pair's push in push_last as a first claim does; it may be on his
// device, so it is not waiting again as one handed back unsent is);
// "two" comes and "one" is recalled. The recall's decision
// writes the push of "two", locks bob's push_last row, then his
// notifications; a node's claim of the handed-back one locks it, then the
// push_last row. The test holds that row so that the decision takes it
// first and the claim waits behind it: PostgreSQL aborts the claim as a
// deadlock. The claim is made again at once, as a decision or a result
// batch aborted so is, not counted as a database failure
// (chat_push_errors_total{kind="db"}, a warning) and left to the next
// tick; bob gets the notification of "two" once, about a deadlock_timeout
// (1 s) late. Made again, the claim may lock the notification before the
// decision does: then PostgreSQL aborts the decision, which is made again
// too.
func TestAClaimAbortedAsADeadlockWithARecallsDecisionIsMadeAgainAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Delay = time.Millisecond
	dev := r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	one := r.send(conv, 1, "one")
	p := r.pusher()
	c := r.claimBobs(p, conv, time.Minute)
	if err := push.WriteResult(ctx, p, c, "uncounted retry", dev); err != nil {
		t.Fatal(err)
	}
	two := r.send(conv, 1, "two")
	r.recall(conv, 1, one)

	// The decision runs on a session holding the decider's lease, so the
	// node started below only claims and sends.
	conn, err := push.Connect(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, push.DefaultLockKey); err != nil {
		t.Fatal(err)
	}
	hold, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM push_last WHERE user_id = 2 AND conversation_id = $1 FOR UPDATE`, conv); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int64) func() bool { return func() bool { return pgtest.LockWaiters(t, r.pool) == n } }
	decided := testkit.Start(t, "the recall's decision", func() (struct{}, error) {
		return struct{}{}, push.DecideBatch(ctx, p, conn, []int64{conv})
	}, waiting(1))
	reg := prometheus.NewRegistry()
	r.start(func(c *push.Config) { c.Registerer = reg })
	testkit.WaitFor(t, 5*time.Second, "the node's claim to wait behind the decision", waiting(2))
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := decided.Wait(); err != nil {
		t.Errorf("the recall's decision: %v", err)
	}
	testkit.WaitFor(t, 5*time.Second, "PostgreSQL to count the deadlock", func() bool {
		return r.count(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`) > 0
	})
	// Before it, a remove of "one" when the decision found the cut-short
	// notification claimed (it may be on the devices: the claim aborted
	// first), none when the claim was made first and read the recall.
	notes := func() (out []push.Notification) {
		for _, n := range notifications(t, r.ep.Of("bob")) {
			if n.Type == push.TypeMessage {
				out = append(out, n)
			}
		}
		return out
	}
	testkit.WaitFor(t, 5*time.Second, "bob's notification", func() bool { return len(notes()) > 0 })
	r.quiet("bob", len(r.ep.Of("bob")), 300*time.Millisecond)
	if got := notes(); len(got) != 1 || got[0].Seq != two {
		t.Errorf("bob's notifications are %+v, want the one of \"two\" (seq %d)\n%s", got, two, dumpJobs(r))
	}
	if n := dbErrors(t, reg); n != 0 {
		t.Errorf("the claim PostgreSQL aborted as a deadlock counted as %v database failures, want it made again", n)
	}
}

// dbErrors is the pusher's chat_push_errors_total{kind="db"} in reg.
func dbErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "chat_push_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "db" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
