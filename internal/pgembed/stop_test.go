//go:build unix

package pgembed_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/procstate"
)

// A shutdown whose budget is spent by the time PostgreSQL's turn comes
// (clients slow to drain, say) used to SIGKILL the postmaster: PostgreSQL
// could not stop its backends, and one busy with a query ran on, orphaned,
// after chatd had released the data dir. The postmaster now gets an
// immediate shutdown (SIGQUIT), which stops every backend before it exits.
func TestStopWithTheBudgetSpentLeavesNoBackendRunning(t *testing.T) {
	ctx := context.Background()
	_, pool, closeDB := startCluster(t, pgembed.OpenOwner, 2)
	// A connection of its own: the pool's close waits for its own.
	conn, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// Should the backend outlive the postmaster, it must not spin for long.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	busy := make(chan error, 1)
	go func() {
		// A busy loop of 20 s: it checks for interrupts but never whether
		// the postmaster is alive.
		_, err := conn.Exec(ctx, `DO $$ DECLARE t timestamptz := clock_timestamp(); BEGIN
			WHILE clock_timestamp() < t + interval '20 seconds' LOOP END LOOP; END $$`)
		busy <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var active bool
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active')", pid).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the busy query did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}

	spent, cancel := context.WithCancel(ctx)
	cancel()
	if err := closeDB(spent); err == nil {
		t.Error("close with a spent budget: no error, want one saying PostgreSQL was not stopped in time")
	}
	deadline = time.Now().Add(3 * time.Second)
	for {
		st, _ := procstate.Of(pid)
		if st != procstate.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend pid %d is still running its query 3 s after the cluster was stopped and the data dir released", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-busy:
		conn.Close(ctx)
	case <-time.After(10 * time.Second):
		t.Error("the busy query's client was not told the server went away")
	}
}
