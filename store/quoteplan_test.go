package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// openPool is a pool on the database of url, closed at the end of the
// test.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgembed.OpenPool(testCtx(t), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// storeAndURL is a store on a database of the test's own, whose URL it
// returns too, for readers on pools of their own (indexStat); both are
// closed at the end of the test.
func storeAndURL(t *testing.T) (url string, pool *pgxpool.Pool, st *store.Store) {
	t.Helper()
	url = pgtest.NewDB(t)
	pool = openPool(t, url)
	st = store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return url, pool, st
}

// editLookups is how many times read, run on a pool of its own, looked up
// the edits of a message (message_target_idx): what chat_message_at costs
// per reply, quote or edited message it reads as of an earlier entry.
func editLookups(t *testing.T, url string, read func(st *store.Store, sess *store.Sessions)) int64 {
	t.Helper()
	return indexStat(t, url, "message_target_idx", "idx_scan", read)
}

// indexStat is how much read, run on a pool of its own, added to stat
// (idx_scan, idx_tup_read) of index. It is read once read's connections
// have exited, which flushes their statistics.
func indexStat(t *testing.T, url, index, stat string, read func(st *store.Store, sess *store.Sessions)) int64 {
	t.Helper()
	return indexesStat(t, url, []string{index}, stat, read)
}

// indexesStat is indexStat summed over indexes (one that does not exist
// adds nothing).
func indexesStat(t *testing.T, url string, indexes []string, stat string, read func(st *store.Store, sess *store.Sessions)) int64 {
	t.Helper()
	return poolIndexesStat(t, url, indexes, stat, func(probe *pgxpool.Pool) {
		st := store.New(probe, chat.DefaultLimits())
		read(st, store.NewSessions(probe))
		if err := st.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// poolIndexesStat is indexesStat of a read given the pool itself (for the
// readers a store does not make, such as store.Presence).
func poolIndexesStat(t *testing.T, url string, indexes []string, stat string, read func(probe *pgxpool.Pool)) int64 {
	t.Helper()
	ctx := testCtx(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "edit-lookups"
	probe, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stats := openPool(t, url)
	count := func() int64 {
		mustExec(t, ctx, stats, `SELECT pg_stat_clear_snapshot()`)
		return queryInt(t, stats, `SELECT COALESCE(sum(`+stat+`), 0)::bigint FROM pg_stat_user_indexes WHERE indexrelname = ANY($1)`, indexes)
	}
	before := count()
	read(probe)
	probe.Close()
	waitFor(t, "the reader's connections to exit", func() bool {
		return queryInt(t, stats, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'edit-lookups'`) == 0
	})
	return count() - before
}

// A founder's history page and catch-up (a member whose history floor
// hides nothing) read every quote and message as it is now: they look up
// no edits, whatever the replies and edited messages among the entries.
// A member added later to a "joined" group does, for the replies to
// messages from before their join (their quotes as sent).
func TestAFoundersHistoryAndCatchUpLookUpNoEdits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, st := storeAndURL(t)
	g := mustGroup(t, st, 1, 2)
	const founder, late = 2, 9
	// 2,000 entries: a fifth replies to an earlier message, every tenth an
	// edit of the one five before it.
	mustExec(t, ctx, pool, `
		INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, kind, target_seq, msg_no, reply_to, edited_at)
		SELECT $1, s, 1, gen_random_uuid(), 'entry ' || s, CASE WHEN s % 10 = 0 THEN 'edit' ELSE 'message' END,
		       CASE WHEN s % 10 = 0 THEN s - 5 END, s, CASE WHEN s % 5 = 1 AND s > 5 THEN s - 1 END,
		       CASE WHEN s % 10 = 5 THEN now() END
		FROM generate_series(1, 2000) s`, g.ID)
	mustExec(t, ctx, pool, `UPDATE conversation SET last_seq = 2000 WHERE id = $1`, g.ID)
	mustExec(t, ctx, pool, `ANALYZE`)
	mustAdd(t, ctx, st, g.ID, 1, late, "")
	for seq := int64(1975); seq < 2000; seq += 10 {
		mustReply(t, st, g.ID, founder, "re", seq)
	}
	last := lastSeq(t, pool, g.ID)

	// Three pages of history, or three catch-ups (starting at the join at
	// the earliest).
	history := func(user int64) func(*store.Store, *store.Sessions) {
		return func(st *store.Store, _ *store.Sessions) {
			for range 3 {
				mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: user, Limit: 50})
			}
		}
	}
	catchUp := func(user, after int64) func(*store.Store, *store.Sessions) {
		return func(_ *store.Store, sess *store.Sessions) {
			for range 3 {
				if got := sinceOne(t, ctx, sess, user, chat.Range{ConversationID: g.ID, After: after}); len(got) == 0 {
					t.Fatalf("user %d catches up on nothing", user)
				}
			}
		}
	}
	if n := editLookups(t, url, history(late)) + editLookups(t, url, catchUp(late, 2000)); n == 0 {
		t.Fatalf("the late member's history and catch-up looked up no edits; want the quotes of the replies to messages from before their join")
	}
	if n := editLookups(t, url, history(founder)); n != 0 {
		t.Errorf("the founder's history looked up edits %d times, want none: it reads every entry as it is now", n)
	}
	if n := editLookups(t, url, catchUp(founder, last-50)); n != 0 {
		t.Errorf("the founder's catch-up looked up edits %d times, want none: it reads every entry as it is now", n)
	}
}
