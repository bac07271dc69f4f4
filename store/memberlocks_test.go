package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// Membership changes lock the member rows they write in (conversation,
// user) order, as read-receipt batches do: a change that took them in
// another order could hold a row a batch wants while waiting for one the
// batch holds, and PostgreSQL breaks that after deadlock_timeout by
// failing one of them (the change as "unavailable", or the batch retried
// after a stall).
//
// Each test opens the window deterministically: a blocker holds one member
// row, a read batch for the group's members (in key order, the real
// statement) locks the rows before it and waits there, the change then
// runs and waits for the batch, and only then is the blocker released.

// newSeqScanStore is newStore on connections that plan sequential scans
// (as PostgreSQL may for a small or unanalyzed table): a statement that
// updates several member rows then meets them in the heap's order, not in
// the primary key's, so only an explicit ORDER BY ... FOR UPDATE keeps the
// lock order.
func newSeqScanStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgembed.OpenPool(context.Background(),
		pgtest.NewDB(t)+" enable_indexscan=off enable_bitmapscan=off enable_indexonlyscan=off", 16)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st, pool
}

// holdMemberRow locks (conv, user) in a transaction of its own until the
// returned release is called.
func holdMemberRow(t *testing.T, ctx context.Context, pool *pgxpool.Pool, conv, user int64) (release func()) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM conversation_member WHERE conversation_id = $1 AND user_id = $2 FOR UPDATE`, conv, user); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctx) }
}

// startReadBatch runs a read batch's member locks for users of conv in a
// transaction that commits once it holds them all; its error arrives on
// the returned channel.
func startReadBatch(t *testing.T, ctx context.Context, pool *pgxpool.Pool, conv int64, users ...int64) <-chan error {
	t.Helper()
	convs := make([]int64, len(users))
	for i := range users {
		convs[i] = conv
	}
	done := make(chan error, 1)
	go func() {
		done <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, store.LockMembersSQL, convs, users)
			return err
		})
	}()
	return done
}

// waitLockWaiters polls until n backends of the test's database wait for
// a lock.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, n int64, what string) {
	t.Helper()
	waitFor(t, what, func() bool {
		return pgtest.LockWaiters(t, pool) >= n
	})
}

// raceReadBatch runs change against a read batch of (g,3), (g,4), (g,5)
// stopped at (g,4), and wants both to succeed.
func raceReadBatch(t *testing.T, ctx context.Context, pool *pgxpool.Pool, g int64, what string, change func() error) {
	t.Helper()
	release := holdMemberRow(t, ctx, pool, g, 4)
	batch := startReadBatch(t, ctx, pool, g, 3, 4, 5)
	waitLockWaiters(t, pool, 1, "the read batch to wait for (g,4)")
	changed := make(chan error, 1)
	go func() { changed <- change() }()
	waitLockWaiters(t, pool, 2, what+" to wait for the read batch")
	release()
	deadline := time.After(30 * time.Second)
	for range 2 {
		select {
		case err := <-batch:
			if err != nil {
				t.Errorf("read batch: %v", err)
			}
		case err := <-changed:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-deadline:
			t.Fatalf("%s and the read batch did not finish", what)
		}
	}
}

// The owner of a group of 5 (owner), 3 and 4 leaves (3, the lower id of
// the two who joined together, succeeds: a row before the owner's in key
// order), or hands the group to 3 (the owner's row comes first in the
// heap: the creator is inserted first); either way while a read batch
// holds the member rows in key order. Neither deadlocks, and the roles
// come out as they should.
func TestChangingOwnershipWhileAReadBatchLocksMembersDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what  string
		op    func(ctx context.Context, st *store.Store, g int64) error
		roles map[int64]chat.Role
	}{
		{"owner leaves", func(ctx context.Context, st *store.Store, g int64) error { return st.RemoveMember(ctx, g, 5, 5) },
			map[int64]chat.Role{3: chat.RoleOwner}},
		{"owner transfers", func(ctx context.Context, st *store.Store, g int64) error { return st.TransferOwnership(ctx, g, 5, 3) },
			map[int64]chat.Role{3: chat.RoleOwner, 5: chat.RoleAdmin}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			st, pool := newSeqScanStore(t)
			g := mustGroup(t, st, 5, 3, 4)
			raceReadBatch(t, ctx, pool, g.ID, tc.what, func() error { return tc.op(ctx, st, g.ID) })
			for user, want := range tc.roles {
				if m := member(t, st, g.ID, 3, user); m.Role != want {
					t.Fatalf("%s: user %d's role %s, want %s", tc.what, user, m.Role, want)
				}
			}
		})
	}
}
