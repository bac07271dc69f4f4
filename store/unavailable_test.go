package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// everyCall runs each Store method once with plausible arguments.
func everyCall(ctx context.Context, st *store.Store, conv int64) map[string]error {
	errs := map[string]error{}
	_, errs["send"] = st.Send(ctx, sendReq(conv, 1, "hello"))
	_, errs["mark read"] = st.MarkRead(ctx, conv, 1, 1)
	_, errs["history"] = st.History(ctx, chat.HistoryQuery{ConversationID: conv, UserID: 1})
	_, errs["inbox"] = st.Inbox(ctx, 1, 0, "")
	_, errs["seen by"] = st.SeenBy(ctx, conv, 1, 1)
	_, _, errs["create group"] = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "g", Members: []int64{2}})
	_, _, errs["open direct"] = st.OpenDirect(ctx, 1, 2)
	_, errs["get conversation"] = st.GetConversation(ctx, conv, 1)
	_, _, errs["add member"] = st.AddMember(ctx, conv, 1, 3, chat.RoleMember)
	errs["remove member"] = st.RemoveMember(ctx, conv, 1, 2)
	_, errs["members"] = st.Members(ctx, conv)
	_, errs["is member"] = st.IsMember(ctx, conv, 1)
	return errs
}

func wantAllUnavailable(t *testing.T, errs map[string]error) {
	t.Helper()
	for op, err := range errs {
		if !errors.Is(err, chat.ErrUnavailable) {
			t.Errorf("%s: got %v, want unavailable", op, err)
		}
	}
}

func TestClosedPoolIsUnavailable(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	conv := mustGroup(t, st, 1, 2)
	pool.Close()
	wantAllUnavailable(t, everyCall(testCtx(t), st, conv.ID))
}

func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	// Nothing listens here: every connection attempt is refused.
	pool, err := pgembed.OpenPool(testCtx(t),
		"host=/nonexistent-chatd-socket-dir port=5432 user=postgres dbname=chat sslmode=disable connect_timeout=2", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	wantAllUnavailable(t, everyCall(testCtx(t), store.New(pool, chat.DefaultLimits()), 1))
}

func TestCancelledContextIsUnavailable(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	conv := mustGroup(t, st, 1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantAllUnavailable(t, everyCall(ctx, st, conv.ID))
}

func TestSendBlockedPastItsDeadlineIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	// Another transaction holds the conversation lock.
	release := pgtest.LockConversation(t, ctx, pool, conv.ID)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := st.Send(short, sendReq(conv.ID, 1, "stuck"))
	if !errors.Is(err, chat.ErrUnavailable) {
		t.Fatalf("send past its deadline: got %v, want unavailable", err)
	}
	release()
	// The abandoned send left nothing behind.
	if m := mustSend(t, st, conv.ID, 1, "after"); m.Seq != 1 {
		t.Fatalf("next send got seq %d, want 1", m.Seq)
	}
}

func TestTerminatedConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.NewDB(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	// One connection, never pinged before use: the next call must run on the
	// connection the server has just killed, as after a database restart.
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool, chat.DefaultLimits())
	conv := mustGroup(t, st, 1, 2)
	var pid int32
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	admin := pgtest.NewPool(t)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backend to exit", func() bool {
		return queryInt(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) == 0
	})
	_, err = st.Send(ctx, sendReq(conv.ID, 1, "into the void"))
	if !errors.Is(err, chat.ErrUnavailable) {
		t.Fatalf("send on a terminated connection: got %v, want unavailable", err)
	}
	// The pool replaces the dead connection: the retry works.
	if m := mustSend(t, st, conv.ID, 1, "retry"); m.Seq != 1 {
		t.Fatalf("retry got seq %d, want 1", m.Seq)
	}
}

// A send whose conversation lock is released around its deadline either
// commits and says so, or fails as unavailable and leaves nothing: never
// "unavailable" for a message that is in the database. The lock is
// released at a range of moments around the deadline, which is where a
// cancel from chatd's side raced the COMMIT already in the pipeline.
func TestSendNearItsDeadlineReportsWhatPostgreSQLDid(t *testing.T) {
	t.Parallel()
	ctx, st, pool, conv := groupOf12(t)
	const wait = 200 * time.Millisecond
	committed, failed := 0, 0
	for i := 0; i < 30; i++ {
		release := pgtest.LockConversation(t, ctx, pool, conv.ID)
		req := sendReq(conv.ID, 1, "near the deadline")
		short, cancel := context.WithTimeout(ctx, wait)
		done := make(chan error, 1)
		go func() {
			_, err := st.Send(short, req)
			done <- err
		}()
		// The timing is the test: release the lock between 10 ms before
		// and 19 ms after the sender's deadline.
		time.Sleep(wait - 10*time.Millisecond + time.Duration(i)*time.Millisecond)
		release()
		err := <-done
		cancel()
		stored := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND client_msg_id = $2`, conv.ID, req.ClientMsgID)
		switch {
		case err == nil && stored == 1:
			committed++
		case errors.Is(err, chat.ErrUnavailable) && stored == 0:
			failed++
		default:
			t.Fatalf("release %d ms after the deadline: send returned %v, message stored %d times", i-10, err, stored)
		}
	}
	t.Logf("%d committed, %d unavailable", committed, failed)
}
