package push_test

import (
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
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
