package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// The loser's side of a key claim, made certain rather than left to
// timing: another transaction has claimed the key and not committed; the
// write waits on it, and answers what that one made if it commits
// (conflict when it made another group), or makes its own if it rolls
// back. Each time, only one conversation is left.
func TestAKeyedGroupCreateWaitingOnAnotherClaimOfItsKeyAnswersThatGroup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, title string
		commit      bool
	}{
		{"the other commits the same group", "team", true},
		{"the other commits another group", "another", true},
		{"the other rolls back", "team", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			st, pool := newStore(t)
			key := uuid.NewString()
			hold := beginHold(t, ctx, pool)
			var theirs int64
			if err := hold.QueryRow(ctx, `INSERT INTO conversation (type, title) VALUES ($1, $2) RETURNING id`, chat.Group, c.title).Scan(&theirs); err != nil {
				t.Fatal(err)
			}
			holdExec(t, ctx, hold, `INSERT INTO conversation_member (conversation_id, user_id, role) VALUES ($1, 1, 'owner'), ($1, 2, 'member')`, theirs)
			holdExec(t, ctx, hold, `INSERT INTO group_create (creator_id, create_key, conversation_id, title, members) VALUES (1, $1, $2, $3, '{2}')`, key, theirs, c.title)

			done := inBackground(func() (chat.Conversation, bool, error) {
				return st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "team", Members: []int64{2}, Key: key})
			})
			endHoldOnceWaitedOn(t, ctx, pool, hold, "group_create", c.commit)
			var r opened
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the create never answered")
			}

			switch {
			case c.commit && c.title == "team":
				if r.err != nil || r.created || r.conv.ID != theirs {
					t.Fatalf("answered group %d created=%v, %v; want the other's group %d, not created", r.conv.ID, r.created, r.err, theirs)
				}
			case c.commit:
				wantCode(t, "the key the other claimed for another group", r.err, chat.CodeConflict)
			default:
				if r.err != nil || !r.created || r.conv.ID == theirs {
					t.Fatalf("answered group %d created=%v, %v; want a group of its own", r.conv.ID, r.created, r.err)
				}
				if n := queryInt(t, pool, `SELECT count(*) FROM group_create WHERE create_key = $1 AND conversation_id = $2`, key, r.conv.ID); n != 1 {
					t.Fatalf("the key names its group %d times, want once", n)
				}
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM conversation`); n != 1 {
				t.Fatalf("%d conversations, want 1: the loser's row is rolled back", n)
			}
		})
	}
}

// As for a keyed group: an open of a pair whose direct_pair another
// transaction holds uncommitted answers that one's conversation if it
// commits, and makes its own if it rolls back. (OpenDirect's pair lock
// makes two opens take turns before they get there; the claim is what
// holds when a writer does not take it.)
func TestAnOpenDirectWaitingOnAnotherClaimOfThePairAnswersThatConversation(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "the other commits", false: "the other rolls back"}[commit], func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			st, pool := newStore(t)
			hold := beginHold(t, ctx, pool)
			var theirs int64
			if err := hold.QueryRow(ctx, `INSERT INTO conversation (type) VALUES ($1) RETURNING id`, chat.Direct).Scan(&theirs); err != nil {
				t.Fatal(err)
			}
			holdExec(t, ctx, hold, `INSERT INTO conversation_member (conversation_id, user_id, role) VALUES ($1, 3, 'member'), ($1, 7, 'member')`, theirs)
			holdExec(t, ctx, hold, `INSERT INTO direct_pair (user_low, user_high, conversation_id) VALUES (3, 7, $1)`, theirs)

			done := inBackground(func() (chat.Conversation, bool, error) { return st.OpenDirect(ctx, 7, 3) })
			endHoldOnceWaitedOn(t, ctx, pool, hold, "direct_pair", commit)
			var r opened
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the open never answered")
			}

			if r.err != nil || r.created == commit || (r.conv.ID == theirs) != commit {
				t.Fatalf("answered conversation %d created=%v, %v; the other's is %d, committed=%v", r.conv.ID, r.created, r.err, theirs, commit)
			}
			if ids := memberIDs(r.conv); len(ids) != 2 || ids[0] != 3 || ids[1] != 7 {
				t.Fatalf("members %v, want [3 7]", ids)
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM conversation`); n != 1 {
				t.Fatalf("%d conversations, want 1: the loser's row is rolled back", n)
			}
		})
	}
}

// beginHold begins the transaction that claims a key first.
func beginHold(t *testing.T, ctx context.Context, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.WithoutCancel(ctx)) })
	return hold
}

func holdExec(t *testing.T, ctx context.Context, hold pgx.Tx, sql string, args ...any) {
	t.Helper()
	if _, err := hold.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// endHoldOnceWaitedOn commits hold (else rolls it back) once a claim of
// the key it holds in table waits on it.
func endHoldOnceWaitedOn(t *testing.T, ctx context.Context, pool *pgxpool.Pool, hold pgx.Tx, table string, commit bool) {
	t.Helper()
	waitFor(t, "a claim waiting on the held key of "+table, func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO '||$1::text||'%'`, table) == 1
	})
	end := hold.Rollback
	if commit {
		end = hold.Commit
	}
	if err := end(ctx); err != nil {
		t.Fatal(err)
	}
}

// opened is the outcome of a call that opens or creates a conversation.
type opened struct {
	conv    chat.Conversation
	created bool
	err     error
}

// inBackground runs open on a goroutine of its own: the test watches it
// wait for a lock and then answers.
func inBackground(open func() (chat.Conversation, bool, error)) <-chan opened {
	done := make(chan opened, 1)
	go func() {
		conv, created, err := open()
		done <- opened{conv, created, err}
	}()
	return done
}
