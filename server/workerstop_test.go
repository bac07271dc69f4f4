package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// A background worker that does not stop when the node closes (a write to
// Kafka that hangs, holding a database connection) used to hold Close, and
// with it chatd's exit, for ever: Close returns once its budget is spent
// and names the worker.
func TestCloseReturnsWithinItsBudgetNamingTheBackgroundWorkersThatDidNotStop(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	srv := startNode(t, pgtest.NewDB(t), nil, server.WithWorker("stuck exporter", func(ctx context.Context, pool *pgxpool.Pool) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		close(held)
		<-release // deaf to ctx
		return nil
	}))
	t.Cleanup(func() { close(release) })
	testkit.Receive(t, held, 10*time.Second, "the worker did not start")

	const budget = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- srv.Close(ctx) }()
	// CleanupGrace (5 s) more for the node's own cleanup, and slack for
	// a loaded machine.
	const bound = budget + 5*time.Second + 3*time.Second
	var err error
	select {
	case err = <-closed:
	case <-time.After(bound):
		t.Fatalf("Close still waiting %v after it was called with a budget of %v", bound, budget)
	}
	t.Logf("Close returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "stuck exporter") {
		t.Fatalf("Close: %v, want an error naming the worker that did not stop", err)
	}
	for _, name := range []string{"push", "outbox pruner", "notices watch", "session expiry"} {
		if strings.Contains(err.Error(), name) {
			t.Errorf("Close names %q, which stopped: %v", name, err)
		}
	}
}
