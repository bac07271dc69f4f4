package store_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// TestAnOrphanedTransactionReleasesItsConversationWithinTheIdleBound: the
// connection of a group rename died between its UPDATE of the
// conversation row and its COMMIT, and PostgreSQL has not noticed: its
// backend is idle in transaction and holds the row every send to the
// group locks for its seq. PostgreSQL ends it after
// idle_in_transaction_session_timeout (10 s, set on chatd's pool
// connections), and a send to the group goes through then. Before, the
// backend held the row until the server's TCP keepalives found the
// connection dead (two hours by default) or the test ended: every send
// to the group failed meanwhile.
func TestAnOrphanedTransactionReleasesItsConversationWithinTheIdleBound(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	var got string
	if err := pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "10s" {
		t.Errorf("idle_in_transaction_session_timeout = %q on chatd's pool connections, want 10s", got)
	}
	proxy := pgtest.NewAnswerLosing(t, pool)
	st := store.New(proxy.Pool, chat.DefaultLimits(), store.WithSendPool(pool))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	conv := mustGroup(t, st, 1, 2)

	cut := proxy.Orphan("UPDATE conversation SET title")
	title := "renamed"
	go func() { _, _ = st.UpdateGroup(ctx, conv.ID, 1, chat.GroupUpdate{Title: &title}) }()
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the rename's COMMIT was not held back")
	}
	orphaned := time.Now()
	req := sendReq(conv.ID, 2, "after the rename")
	testkit.WaitFor(t, 20*time.Second, "a send to the group whose row the orphaned rename holds", func() bool {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := st.Send(sctx, req)
		return err == nil
	})
	t.Logf("the send went through %v after the rename's connection died", time.Since(orphaned).Round(100*time.Millisecond))
	if got := queryInt(t, pool, `SELECT count(*) FROM conversation WHERE id = $1 AND title = $2`, conv.ID, title); got != 0 {
		t.Errorf("the orphaned rename committed (%d rows), want it rolled back", got)
	}
}

// TestABlobDeletionRoundLongerThanTheIdleBoundCommits: a deletion round's
// transaction is idle while the blob store deletes, here longer than the
// pool's idle_in_transaction_session_timeout (10 s): the round turns it
// off for itself, so it commits and forgets the blobs it deleted. With
// the pool's bound, PostgreSQL would end the session mid-round and the
// round would fail, its blobs deleted again at every round.
func TestABlobDeletionRoundLongerThanTheIdleBoundCommits(t *testing.T) {
	t.Parallel()
	_, pool := newStore(t)
	as := store.NewAttachments(pool)
	ctx := testCtx(t)
	if err := as.QueueBlobDeletion(ctx, "aa/slow", "test", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := as.DeleteBlobs(ctx, 10, func(ctx context.Context, _ string) error {
		select {
		case <-time.After(11 * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil || n != 1 {
		t.Fatalf("a deletion round idle for 11 s = %d, %v; want 1 deleted", n, err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM blob_deletion`); n != 0 {
		t.Errorf("%d deletions left, want none", n)
	}
}
