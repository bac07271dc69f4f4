package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pastIdleBound is longer than the pool's idle_in_transaction_session_timeout
// (pgembed.IdleInTransactionTimeout): a helper's transaction idle that
// long is ended by PostgreSQL unless it turned the timeout off.
func pastIdleBound(t *testing.T) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(pgembed.IdleInTransactionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return d + 2*time.Second
}

// TestALockedConversationStaysLockedPastTheIdleBound: a test that holds
// a conversation's row (LockConversation) for longer than the pool's
// idle_in_transaction_session_timeout still holds it: a change of the
// conversation waits until release, not until PostgreSQL ends the
// holder's session, and release ends the transaction cleanly.
func TestALockedConversationStaysLockedPastTheIdleBound(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.NewPool(t)
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO conversation (type) VALUES ('GROUP') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	release := pgtest.LockConversation(t, ctx, pool, id)
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, `UPDATE conversation SET title = 'x' WHERE id = $1`, id)
		done <- err
	}()
	// Waiting out the bound is what is tested: no event marks it.
	select {
	case err := <-done:
		t.Fatalf("a change of the locked conversation went through (%v) before release: the lock was let go", err)
	case <-time.After(pastIdleBound(t)):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the change after release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change did not go through after release")
	}
}

// TestAHeldInsertStaysHeldPastTheIdleBound: an INSERT held by
// HoldAfterInsert for longer than the pool's
// idle_in_transaction_session_timeout is still held, and release
// commits (it failed: PostgreSQL had ended the holder's session).
func TestAHeldInsertStaysHeldPastTheIdleBound(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE held (x int)`); err != nil {
		t.Fatal(err)
	}
	release := pgtest.HoldAfterInsert(t, ctx, pool, "held")
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, `INSERT INTO held VALUES (1)`)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the held INSERT went through (%v) before release", err)
	case <-time.After(pastIdleBound(t)):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the INSERT after release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the INSERT did not go through after release")
	}
}
