package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// takeOver leaves bob's pushes of a direct conversation where a claim
// takes one notification over from another: the push of message "one"
// was claimed and waits for a retry to bob's device, and the push of
// "two" is due. It answers the pusher (not running: the test decides and
// claims), the conversation and the two messages.
func (r *rig) takeOver() (p *push.Pusher, conv, one, two int64) {
	r.t.Helper()
	r.cfg.Delay, r.cfg.MinInterval = 0, 0
	dev := r.subscribe(2, "bob")
	conv = r.direct(1, 2)
	one = r.send(conv, 1, "one")
	p = r.pusher()
	first := r.claimBobs(p, conv, time.Minute)
	if err := push.WriteResult(context.Background(), p, first, "retry", dev); err != nil {
		r.t.Fatal(err)
	}
	two = r.send(conv, 1, "two")
	r.decideAll(p, []int64{conv}, 2)
	return p, conv, one, two
}

// removes lists the seqs of the remove jobs, as a remove push names them.
func (r *rig) removes() []int64 {
	r.t.Helper()
	return pgtest.QueryOne[[]int64](r.t, r.pool, `SELECT COALESCE(array_agg(s ORDER BY s), '{}') FROM push_job j,
    unnest(j.covered) x, generate_series(lower(x), upper(x) - 1) s WHERE j.kind = 'remove'`)
}

// TestARecallRacingAClaimThatTakesANotificationOverRemovesWhatTheDevicesShow:
// message "one" was pushed (its push waits for a retry) and "two" is due
// when "one" is recalled; a claim of the push of "two" takes the older
// one over (it covers "one" too, and replaces it on the devices), and the
// recall's decision runs after it, or while it holds its rows. Where the
// claim read "one" as recalled already, the push of "two" neither shows
// nor counts it, and no remove may follow it (a remove naming "one"
// after it would take one message out of a notification of one message:
// the devices close the notification of "two"). Where the claim read
// "one" before the recall, its notification counts it, and the remove
// naming "one" follows it.
func TestARecallRacingAClaimThatTakesANotificationOverRemovesWhatTheDevicesShow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	claimed := func(t *testing.T, r *rig, cs []push.Claim) {
		t.Helper()
		if len(cs) != 1 {
			t.Fatalf("claimed %d pushes, want the push of \"two\"\n%s", len(cs), dumpJobs(r))
		}
	}
	// recallWhileClaiming claims in a transaction, runs between (the
	// claim done) what the test gives, then the recall's decision, which
	// must wait for the claim's rows or find them as it left them, and
	// commits the claim.
	recallWhileClaiming := func(t *testing.T, r *rig, p *push.Pusher, conv int64, between func()) {
		tx, err := r.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		cs, err := push.ClaimsInTx(ctx, p, tx, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		claimed(t, r, cs)
		between()
		decided := testkit.Start(t, "the recall's decision", func() (int, error) {
			return r.decide(ctx, p, conv)
		}, func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := decided.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("the claim read the recall and committed first", func(t *testing.T) {
		t.Parallel()
		r := newRig(t)
		p, conv, one, _ := r.takeOver()
		r.recall(conv, 1, one)
		claimed(t, r, r.claims(p, 10, time.Minute))
		if _, err := r.decide(ctx, p, conv); err != nil {
			t.Fatal(err)
		}
		if got := r.removes(); len(got) != 0 {
			t.Errorf("removes of %v follow the push of \"two\", which does not show or count them\n%s", got, dumpJobs(r))
		}
	})
	t.Run("the claim read the recall and holds its rows", func(t *testing.T) {
		t.Parallel()
		r := newRig(t)
		p, conv, one, _ := r.takeOver()
		r.recall(conv, 1, one)
		recallWhileClaiming(t, r, p, conv, func() {})
		if got := r.removes(); len(got) != 0 {
			t.Errorf("removes of %v follow the push of \"two\", which does not show or count them\n%s", got, dumpJobs(r))
		}
	})
	t.Run("the claim read the message before the recall", func(t *testing.T) {
		t.Parallel()
		r := newRig(t)
		p, conv, one, _ := r.takeOver()
		recallWhileClaiming(t, r, p, conv, func() { r.recall(conv, 1, one) })
		if got := r.removes(); len(got) != 1 || got[0] != one {
			t.Errorf("removes of %v, want one of %d: the push of \"two\" counted it\n%s", got, one, dumpJobs(r))
		}
	})
}

// TestARecallOfAMessageAcknowledgedBeforeItsPushTakesNothingOutOfIt: a
// push decided for "one" and "two" waits; bob's app acknowledges "one"
// meanwhile, so the push counts "two" alone; "one" is recalled after: no
// remove follows (it would take "one" out of a notification that never
// counted it, and the devices would close the notification of "two").
func TestARecallOfAMessageAcknowledgedBeforeItsPushTakesNothingOutOfIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.Delay = 0
	r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	one := r.send(conv, 1, "one")
	r.send(conv, 1, "two")
	p := r.pusher()
	r.decideAll(p, []int64{conv}, 1)
	r.ack(conv, 2, one)
	cs := r.claims(p, 10, time.Minute)
	if len(cs) != 1 {
		t.Fatalf("claimed %d pushes, want bob's", len(cs))
	}
	if err := push.WriteResult(ctx, p, cs[0], "shown", 0); err != nil {
		t.Fatal(err)
	}
	r.recall(conv, 1, one)
	if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		_, err := push.DecideInTx(ctx, p, tx, []int64{conv})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := r.removes(); len(got) != 0 {
		t.Errorf("removes of %v follow a push that counted \"two\" alone\n%s", got, dumpJobs(r))
	}
}
