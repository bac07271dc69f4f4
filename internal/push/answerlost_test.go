package push_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestARecallOfAMessageWhosePushsStartLostItsAnswerSendsNoRemove: bob's
// notification was claimed, and its worker marked its send started;
// PostgreSQL committed the mark, but its answer was lost with the
// connection, so the worker sent nothing. Alice recalls the message
// meanwhile: nothing of it reached bob's devices, so bob gets nothing,
// neither the notification nor a remove.
func TestARecallOfAMessageWhosePushsStartLostItsAnswerSendsNoRemove(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy := pgtest.NewAnswerLosing(t, r.pool)
	held, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(release)
	cut := proxy.LoseAnswer("SET unsent_claim = NULL", func() {
		close(held)
		<-proceed
	})
	r.start(func(c *push.Config) { c.Pool = proxy.Pool })
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	seq := r.send(conv, 1, "hi bob")
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatalf("bob's push was not marked started\njobs:\n%s", dumpJobs(r))
	}
	// The mark is committed, its answer not given yet: the worker waits.
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND kind = 'message' AND state = 'sending' AND unsent_claim IS NULL`); n != 1 {
		t.Fatalf("%d of bob's notifications marked started, want 1\njobs:\n%s", n, dumpJobs(r))
	}
	r.recall(conv, 1, seq)
	// The decider reads the recall while the notification is claimed (it
	// may be on a device for all the database knows): a remove is owed.
	r.waitCount(1, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND kind = 'remove'`)
	release()
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the mark's answer was not lost")
	}
	r.waitCount(0, 30*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 0, 500*time.Millisecond)
}

// What a transaction of the pusher did is counted once it committed,
// also when the answer to its COMMIT was lost with the connection (the
// node asks PostgreSQL what became of it): the jobs a decision wrote
// (chat_push_decided_total), the removes a recall owed
// (chat_push_removes_total) and the devices a result batch deleted
// (chat_push_devices_deleted_total). Before, each was counted only on an
// answered COMMIT: 0 here.
func TestWhatATransactionWhoseCommitLostItsAnswerDidIsCounted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, statement, counter string
		// run does what the armed statement is part of, once the
		// pusher runs through the proxy
		run func(r *rig, conv int64)
	}{
		{"a decision", "INSERT INTO push_last AS l", "chat_push_decided_total", func(r *rig, conv int64) {
			r.send(conv, 1, "hi bob")
			r.waitPushes("bob", 1, 5*time.Second)
		}},
		{"a recall's remove", "'remove', seq, n, actor, covered FROM rm", "chat_push_removes_total", nil},
		{"a deleted device", "DELETE FROM push_device WHERE id = ANY", "chat_push_devices_deleted_total", func(r *rig, conv int64) {
			r.ep.Script("bob", http.StatusGone)
			r.send(conv, 1, "hi bob")
			r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_device WHERE user_id = 2`)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			proxy := pgtest.NewAnswerLosing(t, r.pool)
			reg := prometheus.NewRegistry()
			r.start(func(cfg *push.Config) { cfg.Pool, cfg.Registerer = proxy.Pool, reg })
			conv := r.direct(1, 2)
			r.subscribe(2, "bob")
			run := c.run
			if run == nil {
				seq := r.send(conv, 1, "hi bob")
				r.waitPushes("bob", 1, 5*time.Second)
				r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
				run = func(r *rig, conv int64) {
					r.recall(conv, 1, seq)
					if got := r.waitPushes("bob", 2, 5*time.Second); got[1].Type != push.TypeRemove {
						t.Errorf("bob's push after the recall = %+v, want a remove", got[1])
					}
				}
			}
			cut := proxy.LoseAnswer(c.statement, nil)
			run(r, conv)
			select {
			case <-cut:
			case <-time.After(5 * time.Second):
				t.Fatalf("the answer to the COMMIT of %s was not lost", c.name)
			}
			testkit.WaitFor(t, 5*time.Second, c.counter+" at 1", func() bool { return counter(t, reg, c.counter) == 1 })
		})
	}
}

// TestAPushWhoseClaimLostItsAnswerIsSentWithoutWaitingOutItsLease: the
// claim of bob's notification committed, and the answer to its COMMIT
// was lost with the connection. The node asks PostgreSQL what became of
// it and sends the push at once, not when its lease (11 s here) has run
// out and the next claim takes it back.
func TestAPushWhoseClaimLostItsAnswerIsSentWithoutWaitingOutItsLease(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy := pgtest.NewAnswerLosing(t, r.pool)
	cut := proxy.LoseAnswer("unsent_claim = CASE WHEN p.state = 'pending'", nil)
	r.start(func(c *push.Config) { c.Pool = proxy.Pool })
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	seq := r.send(conv, 1, "hi bob")
	r.answerLost(cut, 10*time.Second, "the claim's answer")
	if got := r.waitPushes("bob", 1, 5*time.Second); got[0].Seq != seq {
		t.Errorf("bob's push = %+v, want the notification of %d", got[0], seq)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 300*time.Millisecond)
}

// TestAQueuedPushWhoseRecheckLostItsAnswerIsSentWithoutWaitingOutItsLease:
// bob's push waited in the queue (the one worker held by a push service
// that hangs), and its worker read it again and renewed its lease
// (recheckSQL); PostgreSQL committed that, but the answer was lost with
// the connection. The worker asks again, finds the claim still its own,
// and sends the push at once, not when its lease (14 s here) has run
// out and the next claim takes it back.
func TestAQueuedPushWhoseRecheckLostItsAnswerIsSentWithoutWaitingOutItsLease(t *testing.T) {
	t.Parallel()
	r, proxy := queuedBehindAHangThroughAnswerLosing(t)
	cut := proxy.LoseAnswer("first_claim is the claim's to know", nil)
	r.answerLost(cut, 15*time.Second, "the recheck's answer")
	r.bobsPushSentOnceInOneAttempt()
}

// TestAPushWhoseClaimsLostTheirAnswersIsChargedOnlyItsSends: bob's push
// service answers the first send with a retry, and both claims of his
// push (the first, and the retry's) commit with their answers lost. A
// lost answer is chatd's trouble, not the device's: each claim sent, and
// is the one attempt it counts, so with MaxAttempts 2 the retry still
// goes (not dropped as gave_up), and the push ends with 2 attempts.
func TestAPushWhoseClaimsLostTheirAnswersIsChargedOnlyItsSends(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy := pgtest.NewAnswerLosing(t, r.pool)
	const claim = "unsent_claim = CASE WHEN p.state = 'pending'"
	cut := proxy.LoseAnswer(claim, nil)
	r.start(func(c *push.Config) {
		c.Pool, c.MaxAttempts, c.BackoffMin, c.BackoffMax = proxy.Pool, 2, 500*time.Millisecond, 500*time.Millisecond
	})
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	r.ep.Script("bob", http.StatusServiceUnavailable)
	seq := r.send(conv, 1, "hi bob")
	r.answerLost(cut, 10*time.Second, "the first claim's answer")
	cut = proxy.LoseAnswer(claim, nil)
	r.waitRequests(1, 5*time.Second, "bob's first send")
	r.answerLost(cut, 10*time.Second, "the retry's claim's answer")
	if got := r.waitPushes("bob", 1, 5*time.Second); got[0].Seq != seq {
		t.Errorf("bob's push = %+v, want the notification of %d", got[0], seq)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if n := r.count(`SELECT attempts FROM push_job WHERE user_id = 2`); n != 2 {
		t.Errorf("bob's push took %d attempts, want 2\njobs:\n%s", n, dumpJobs(r))
	}
}

// TestAPushWhoseOutcomesConnectionDiedIsNotSentAgain: bob's push service
// answers 410 (his device is gone), and the connection writing that
// outcome dies before its transaction commits, its answer lost. The
// outcome is written again on another connection: the device is deleted
// and the push done at once, not left claimed until its lease (11 s
// here) runs out and the claim after it sends it again to the device
// that was gone.
func TestAPushWhoseOutcomesConnectionDiedIsNotSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.start(nil)
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	// The test holds bob's device: the outcome's transaction, deleting
	// it, waits, and the claim, reading it, does not.
	hold, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM push_device WHERE user_id = 2 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	r.ep.Script("bob", http.StatusGone)
	r.send(conv, 1, "hi bob")
	testkit.WaitFor(t, 10*time.Second, "the outcome's transaction waiting for bob's device", func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
	if n := r.count(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); n != 1 {
		t.Fatalf("%d connections ended, want the outcome's", n)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_device WHERE user_id = 2`)
	if got := len(r.ep.Pushes()); got != 1 {
		t.Errorf("%d requests to bob's push service, want 1: %s", got, describe(r.ep.Pushes()))
	}
}

// TestAQueuedPushWhoseRechecksAllLostTheirAnswersIsHandedBack: as in
// TestAQueuedPushWhoseRecheckLostItsAnswerIsSentWithoutWaitingOutItsLease,
// but every re-read of bob's push loses its answer (3). Only
// the worker knows nothing of the claim went out: it hands the push
// back, and it is claimed and sent again at once, not when its lease
// (14 s here) has run out, and counts one attempt.
func TestAQueuedPushWhoseRechecksAllLostTheirAnswersIsHandedBack(t *testing.T) {
	t.Parallel()
	r, proxy := queuedBehindAHangThroughAnswerLosing(t)
	const recheck = "first_claim is the claim's to know"
	lost := make(chan struct{}, 8)
	var (
		mu    sync.Mutex
		times int
	)
	var lose func()
	lose = func() {
		proxy.LoseAnswer(recheck, func() {
			lost <- struct{}{}
			mu.Lock()
			defer mu.Unlock()
			if times++; times < 3 {
				lose()
			}
		})
	}
	lose()
	for i := range 3 {
		select {
		case <-lost:
		case <-time.After(15 * time.Second):
			t.Fatalf("the answer of re-read %d was not lost\njobs:\n%s", i+1, dumpJobs(r))
		}
	}
	r.bobsPushSentOnceInOneAttempt()
}

// TestAQueuedPushWhoseRechecksKeepFailingIsNotClaimedOverAndOver: bob's
// and carol's pushes wait in the queue behind a push service that
// hangs, and every re-read of a queued push (recheck) fails, as when
// PostgreSQL is too slow to answer it in time, for good. Handed back
// once, each push is claimed again, read again in vain, and then waits
// out its lease: it is not claimed and handed back over and over, its
// attempt given back each time (a loop that no MaxAttempts ends). Once
// the re-reads answer again, each push is sent once, one attempt.
func TestAQueuedPushWhoseRechecksKeepFailingIsNotClaimedOverAndOver(t *testing.T) {
	t.Parallel()
	r, proxy := queuedBehindAHangThroughAnswerLosing(t)
	r.subscribe(3, "carol")
	r.send(r.direct(1, 3), 1, "hi carol")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 3 AND state = 'sending' AND attempts = 1`)
	stop := proxy.LoseAnswers("first_claim is the claim's to know")
	defer stop()
	// Both are handed back once (claimed a second time) ...
	r.waitCount(2, 10*time.Second, `SELECT count(*) FROM push_job WHERE user_id IN (2, 3) AND claims >= 2`)
	// ... and then left to their leases (14 s here).
	r.claimedAtMostTwiceFor(4*time.Second, `SELECT max(claims) FROM push_job WHERE user_id IN (2, 3)`, "re-reads keep failing")
	stop()
	for _, name := range []string{"bob", "carol"} {
		r.waitPushes(name, 1, 20*time.Second)
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id IN (2, 3) AND state <> 'sent'`)
	if n := r.count(`SELECT max(attempts) FROM push_job WHERE user_id IN (2, 3)`); n != 1 {
		t.Errorf("bob's or carol's push took %d attempts, want 1\njobs:\n%s", n, dumpJobs(r))
	}
	r.quiet("bob", 1, 300*time.Millisecond)
	r.quiet("carol", 1, 0)
}

// TestAPushWhoseSendStartMarkKeepsFailingIsNotClaimedOverAndOver: every
// mark written right before a notification's first request (startSQL)
// loses its answer, for good. Handed back once, bob's push is claimed
// again, its mark fails again, and it then waits out its lease (14 s
// here): it is not claimed and handed back at every tick, nothing sent,
// its attempt given back each time. Once the marks answer again, it is
// sent once.
func TestAPushWhoseSendStartMarkKeepsFailingIsNotClaimedOverAndOver(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy := pgtest.NewAnswerLosing(t, r.pool)
	r.start(func(c *push.Config) { c.Pool, c.Timeout = proxy.Pool, 3*time.Second })
	stop := proxy.LoseAnswers("SET unsent_claim = NULL")
	defer stop()
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	r.send(conv, 1, "hi bob")
	// Handed back once (claimed a second time) ...
	r.waitCount(1, 10*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND claims >= 2`)
	// ... and then left to its lease.
	r.claimedAtMostTwiceFor(3*time.Second, `SELECT max(claims) FROM push_job WHERE user_id = 2`, "send-start marks keep failing")
	stop()
	r.waitPushes("bob", 1, 20*time.Second)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	r.quiet("bob", 1, 300*time.Millisecond)
}

// queuedBehindAHangThroughAnswerLosing is a rig whose pusher (one worker,
// 3 s timeout) reaches the database through proxy, with bob's push
// queued behind a push service that hangs (queuedBehindAHang). The
// hanging push's retry is not due while the test runs.
func queuedBehindAHangThroughAnswerLosing(t *testing.T) (*rig, *pgtest.AnswerLosing) {
	t.Helper()
	r := newRig(t)
	proxy := pgtest.NewAnswerLosing(t, r.pool)
	r.start(func(c *push.Config) {
		c.Pool, c.Workers, c.Timeout, c.BackoffMin = proxy.Pool, 1, 3*time.Second, time.Minute
	})
	r.queuedBehindAHang()
	return r, proxy
}

// bobsPushSentOnceInOneAttempt: bob gets his push (within 6 s), his job
// is sent, it took one attempt, and no second push follows.
func (r *rig) bobsPushSentOnceInOneAttempt() {
	r.t.Helper()
	r.waitPushes("bob", 1, 6*time.Second)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if n := r.count(`SELECT attempts FROM push_job WHERE user_id = 2`); n != 1 {
		r.t.Errorf("bob's push took %d attempts, want 1\njobs:\n%s", n, dumpJobs(r))
	}
	r.quiet("bob", 1, 300*time.Millisecond)
}

// claimedAtMostTwiceFor: for d, polled every 20 ms, maxClaims (a query of
// the most claims of the pushes watched) stays at most 2: a push whose
// what was not claimed and handed back over and over within its lease.
func (r *rig) claimedAtMostTwiceFor(d time.Duration, maxClaims, what string) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if n := r.count(maxClaims); n > 2 {
			r.t.Fatalf("a push whose %s was claimed %d times, want at most 2 within its lease\njobs:\n%s", what, n, dumpJobs(r))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answerLost waits within for cut (an answer lost), else fails saying
// what was not lost, with the jobs.
func (r *rig) answerLost(cut <-chan struct{}, within time.Duration, what string) {
	r.t.Helper()
	select {
	case <-cut:
	case <-time.After(within):
		r.t.Fatalf("%s was not lost\njobs:\n%s", what, dumpJobs(r))
	}
}
