package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestARecallDecidedWhileTheSkipOfItsPushIsWrittenSendsNoRemove: bob's
// devices show the notification of "zero"; the one of "one" is claimed
// when "one" is recalled. The recall's decision holds the claimed
// notification (it owes a remove for it: the pair's newest claimed one)
// while the claim's outcome, skipped (its one message recalled), is
// written; the decision commits first. Nothing of "one" reached bob's
// devices, so the remove goes with the skip: bob gets nothing more (a
// remove would take "zero"'s notification off his devices).
func TestARecallDecidedWhileTheSkipOfItsPushIsWrittenSendsNoRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	p, conv, _, one, c := r.bobShownZeroAndClaimedOne()
	r.recall(conv, 1, one)
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := push.DecideInTx(ctx, p, tx, []int64{conv}); err != nil {
		t.Fatal(err)
	}
	if n := pgtest.QueryOne[int64](t, r.pool, `SELECT count(*) FROM push_job WHERE kind = 'remove'`); n != 0 {
		t.Fatalf("the decision's remove is seen before it commits (%d)", n)
	}
	written := testkit.Start(t, "the skip's outcome written", func() (struct{}, error) {
		return struct{}{}, push.WriteResult(ctx, p, c, "skipped", 0)
	}, func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
	if written.Returned() {
		t.Fatal("the outcome was written while the decision held the notification")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := written.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := r.removes(); len(got) != 0 {
		t.Errorf("removes of %v are owed for a notification that reached no device\n%s", got, dumpJobs(r))
	}
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 500*time.Millisecond)
}
