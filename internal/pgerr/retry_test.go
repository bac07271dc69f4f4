package pgerr_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/chatd/chatd/internal/pgerr"
)

// deadlock is what PostgreSQL answers a transaction it aborted as a
// deadlock.
var deadlock = &pgconn.PgError{Severity: "ERROR", Code: "40P01", Message: "deadlock detected"}

// conflictRuns runs RetryConflicts on a transaction that always
// deadlocks and returns when each run began.
func conflictRuns(t *testing.T) []time.Time {
	t.Helper()
	var at []time.Time
	err := pgerr.RetryConflicts(context.Background(), func() error {
		at = append(at, time.Now())
		return deadlock
	})
	if !pgerr.Conflict(err) {
		t.Fatalf("RetryConflicts of a transaction that always deadlocks: %v, want the deadlock", err)
	}
	if len(at) != 3 {
		t.Fatalf("a transaction that always deadlocks was run %d times, want 3", len(at))
	}
	return at
}

// TestAConflictIsRunAgainAfterAPauseThatGrowsAndVaries: the transactions
// a deadlock set against each other, run again at once, meet again. Each
// retry waits a random pause, growing: 1-5 ms before the second run,
// 2-10 ms before the third.
func TestAConflictIsRunAgainAfterAPauseThatGrowsAndVaries(t *testing.T) {
	var firsts []time.Duration
	for range 10 {
		at := conflictRuns(t)
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			if least := time.Duration(i) * time.Millisecond; gap < least {
				t.Fatalf("run %d began %v after run %d, want at least %v", i+1, gap, i, least)
			}
		}
		firsts = append(firsts, at[1].Sub(at[0]))
	}
	lo, hi := firsts[0], firsts[0]
	for _, d := range firsts {
		lo, hi = min(lo, d), max(hi, d)
	}
	t.Logf("pauses before the second run: %v", firsts)
	if hi-lo < time.Millisecond/2 {
		t.Errorf("10 pauses before the second run all within %v of each other (%v), want them spread over 1-5 ms", hi-lo, firsts)
	}
}

// TestACancelledContextEndsTheWaitForARetry: a caller gone (its request,
// a shutdown) waits for no retry: the conflict comes back at once, with
// the context's error, and the transaction is not run again.
func TestACancelledContextEndsTheWaitForARetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	err := pgerr.RetryConflicts(ctx, func() error {
		runs++
		cancel()
		return deadlock
	})
	if runs != 1 {
		t.Errorf("a transaction whose context was cancelled as it deadlocked was run %d times, want once", runs)
	}
	if !pgerr.Conflict(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("RetryConflicts cancelled after a deadlock: %v, want the deadlock and context.Canceled", err)
	}
}
