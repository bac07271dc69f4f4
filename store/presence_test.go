package store_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// TestAHeartbeatThatWaitedForAReaperTellsItWasRevived: a node's heartbeat
// that meets another node deleting its row (ReapNodes took it for dead:
// its heartbeat had lapsed) waits for that delete and inserts the row
// again; it must say so (revived), for the node then announces its users
// online again, whom the reaper announced offline. A look at the row
// before the upsert saw it still there and said not revived.
func TestAHeartbeatThatWaitedForAReaperTellsItWasRevived(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t)
	pr := store.NewPresence(pool, time.Minute)
	if revived, err := pr.Heartbeat(ctx, "slow"); err != nil || !revived {
		t.Fatalf("first heartbeat: revived %v, %v", revived, err)
	}
	if revived, err := pr.Heartbeat(ctx, "slow"); err != nil || revived {
		t.Fatalf("second heartbeat: revived %v, %v", revived, err)
	}
	reaper, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reaper.Rollback(ctx) }()
	if _, err := reaper.Exec(ctx, `DELETE FROM chat_node WHERE node_id = 'slow'`); err != nil {
		t.Fatal(err)
	}
	type beat struct {
		revived bool
		err     error
	}
	done := make(chan beat, 1)
	go func() {
		revived, err := pr.Heartbeat(ctx, "slow")
		done <- beat{revived, err}
	}()
	testkit.WaitFor(t, 30*time.Second, "the heartbeat to wait for the reaper's delete", func() bool {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO chat_node%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	if err := reaper.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if b := <-done; b.err != nil || !b.revived {
		t.Fatalf("heartbeat after the reaper deleted its row: revived %v, %v; want revived", b.revived, b.err)
	}
}
