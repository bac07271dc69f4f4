package store_test

import (
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// Two connections of one user open a new client id at once (a device
// retrying its CONNECT): the first inserts the session, the second waits
// for that insert and takes the session over. The session is then the
// second's, as the second asked for it: persistent or not, with its
// expiry and its cursors. Left with the first's flags, a clean session
// taken over by a persistent one was not resumed at the next connect (and
// its client missed what came meanwhile), and a persistent one taken over
// by a clean one resumed with no cursors at all (its client was replayed
// every conversation from its join).
func TestASessionOpenedByTwoConnectionsAtOnceIsTheLaterOnesAsItAskedForIt(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	for _, tc := range []struct {
		firstPersistent, laterPersistent bool
	}{{false, true}, {true, false}} {
		id := fmt.Sprintf("phone-%v-then-%v", tc.firstPersistent, tc.laterPersistent)
		hold := beginHold(t, ctx, pool)
		holdExec(t, ctx, hold, `SELECT * FROM chat_session_open($1, 1, $2, true, 60, 'n/p/1')`, id, tc.firstPersistent)
		type result struct {
			resumed bool
			err     error
		}
		done := make(chan result, 1)
		go func() {
			o, err := ss.Open(ctx, id, "n/p/2", 1, tc.laterPersistent, false, time.Hour)
			done <- result{o.Resumed, err}
		}()
		waitFor(t, "the later open waiting on the first's insert", func() bool {
			return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE '%chat_session_open%' AND query LIKE '%$1%'`) == 1
		})
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || r.resumed {
			t.Fatalf("%s: later open: resumed %v, %v; want a new session", id, r.resumed, r.err)
		}
		var (
			persistent bool
			expiry     int64
			token      string
		)
		if err := pool.QueryRow(ctx, `SELECT persistent, expiry_seconds, conn_token FROM chat_session WHERE client_id = $1`, id).
			Scan(&persistent, &expiry, &token); err != nil {
			t.Fatal(err)
		}
		if persistent != tc.laterPersistent || expiry != 3600 || token != "n/p/2" {
			t.Errorf("%s: session persistent %v, expiry %ds, token %q; want %v, 3600s, n/p/2 (the later open's)",
				id, persistent, expiry, token, tc.laterPersistent)
		}
		// The device reconnects to its persistent session: it resumes only
		// if the last connection had one.
		if err := ss.Touch(ctx, id, "n/p/2", time.Hour); err != nil {
			t.Fatal(err)
		}
		o, err := ss.Open(ctx, id, "n/p/3", 1, true, false, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if o.Resumed != tc.laterPersistent {
			t.Errorf("%s: the next persistent connect resumed %v, want %v", id, o.Resumed, tc.laterPersistent)
		}
	}
}

// A node crashes with a persistent session's connection (its end never
// touched the session); another node reaps it, recording the session last
// seen at the node's last heartbeat. Once the session's expiry has run out
// since then, a reconnect starts a new session, as after a disconnect the
// node saw (docs/protocol.md: even in the minute before the sweep deletes
// it); it resumed, since the crashed connection's token was still there.
// A session whose connection's node is alive is not expired by the time
// it was opened: that connection is still open, and is taken over.
func TestASessionWhoseNodeCrashedIsNotResumedOnceItsExpiryRanOut(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	reaper := store.NewPresence(pool, 30*time.Second)
	for _, crashed := range []bool{false, true} {
		node := fmt.Sprintf("node-crashed-%v", crashed)
		id := "phone-on-" + node
		if _, err := ss.Open(ctx, id, node+"/p/1", 1, true, false, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := reaper.Heartbeat(ctx, node); err != nil {
			t.Fatal(err)
		}
		if err := reaper.SetConnections(ctx, node, []string{id}, []string{node + "/p/1"}, nil, nil); err != nil {
			t.Fatal(err)
		}
		// Connected for two hours; the crashed node's last heartbeat was
		// two minutes ago, past its one-minute expiry.
		mustExec(t, ctx, pool, `UPDATE chat_session SET last_seen_at = now() - interval '2 hours' WHERE client_id = $1`, id)
		if crashed {
			mustExec(t, ctx, pool, `UPDATE chat_node SET heartbeat_at = now() - interval '2 minutes' WHERE node_id = $1`, node)
			if _, err := reaper.ReapNodes(ctx, "node-live"); err != nil {
				t.Fatal(err)
			}
		}
		o, err := ss.Open(ctx, id, "node-live/p/2", 1, true, false, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if o.Resumed == crashed {
			t.Errorf("crashed=%v: the reconnect resumed %v, want %v", crashed, o.Resumed, !crashed)
		}
	}
}

// The only node crashes with a persistent session's connection and starts
// again two hours later (kill -9, a machine that rebooted). The session's
// last connection ended when the node last beat, not when it came back:
// a session whose one-hour expiry ran out meanwhile is not resumed; one
// whose expiry did not is. The restart recorded every such session last
// seen at the restart (and its dead connection's token stayed), so the
// first resumed and would have lived another hour.
func TestASessionOfANodeThatRestartsAfterACrashExpiresFromTheCrash(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	pr := store.NewPresence(pool, 30*time.Second)
	const node = "solo"
	expiries := map[string]time.Duration{"phone-1h": time.Hour, "phone-7d": 7 * 24 * time.Hour}
	for id, expiry := range expiries {
		if _, err := ss.Open(ctx, id, node+"/p1/1", 1, true, false, expiry); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pr.Heartbeat(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := pr.SetConnections(ctx, node, []string{"phone-1h", "phone-7d"}, []string{node + "/p1/1", node + "/p1/1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Connected three hours ago; the node crashed two hours ago.
	mustExec(t, ctx, pool, `UPDATE chat_session SET last_seen_at = now() - interval '3 hours'`)
	mustExec(t, ctx, pool, `UPDATE chat_node SET heartbeat_at = now() - interval '2 hours'`)
	// It starts again: the presence tracker's start.
	if _, err := pr.ResetNode(ctx, node, false); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Heartbeat(ctx, node); err != nil {
		t.Fatal(err)
	}
	for id := range expiries {
		o, err := ss.Open(ctx, id, node+"/p2/1", 1, true, false, expiries[id])
		if err != nil {
			t.Fatal(err)
		}
		if want := id == "phone-7d"; o.Resumed != want {
			t.Errorf("%s: the reconnect after the restart resumed %v, want %v", id, o.Resumed, want)
		}
	}
}

// A persistent session's connection ended, and its node recorded that
// (the presence flag cleared, the session last seen then), but the
// disconnect's own write (Sessions.Touch) was lost: the session still
// names that connection's token, whose node is alive. Once the session's
// expiry has run out since it was last seen, a reconnect starts a new
// session, as the sweep, which would delete it, says; it resumed, since a
// token of a live node was taken for a connection still open.
func TestASessionWhoseDisconnectWriteWasLostIsNotResumedOnceItsExpiryRanOut(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	pr := store.NewPresence(pool, 30*time.Second)
	const node, id = "node-a", "phone-lost-touch"
	if _, err := ss.Open(ctx, id, node+"/p/1", 1, true, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Heartbeat(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := pr.SetConnections(ctx, node, []string{id}, []string{node + "/p/1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// The connection ends: the presence write goes through, the touch
	// does not.
	if err := pr.SetConnections(ctx, node, nil, nil, []string{id}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, pool, `UPDATE chat_session SET last_seen_at = now() - interval '61 seconds' WHERE client_id = $1`, id)
	o, err := ss.Open(ctx, id, node+"/p/2", 1, true, false, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if o.Resumed || o.Present {
		t.Fatalf("the reconnect resumed %v (present %v) a session expired a second ago; want a new session", o.Resumed, o.Present)
	}
}

// Two connections of one user open a new client id at once: the second
// waits for the first's insert, finds the session there (its insert does
// nothing), and before it reads the session again the first's connection
// ends and deletes it (a clean session's end, or the sweep). The second
// open then found no session at all and failed, and its device was
// refused (CONNACK 0x88) for a session nobody held: it opens one of its
// own now. A trigger of this test's database holds the second open
// between its insert and its read, while the test holds an advisory
// lock.
func TestAnOpenWhoseConcurrentFirstOpensSessionIsDeletedMeanwhileOpensItsOwn(t *testing.T) {
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	st := store.New(pool, chat.Limits{})
	if _, _, err := st.OpenDirect(ctx, 1, 2); err != nil { // a conversation: a persistent open makes it a cursor
		t.Fatal(err)
	}
	mustExec(t, ctx, pool, `CREATE FUNCTION test_pause() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_lock_shared(4242); PERFORM pg_advisory_unlock_shared(4242); RETURN NULL; END $$`)
	mustExec(t, ctx, pool, `CREATE TRIGGER test_pause AFTER INSERT ON chat_session FOR EACH STATEMENT EXECUTE FUNCTION test_pause()`)

	hold := beginHold(t, ctx, pool)
	holdExec(t, ctx, hold, `SELECT * FROM chat_session_open('phone', 1, false, true, 0, 'n/p/1')`)
	pause, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pause.Release()
	if _, err := pause.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ss.Open(ctx, "phone", "n/p/2", 1, true, false, time.Hour)
		done <- err
	}()
	waitFor(t, "the second open waiting on the first's insert", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND wait_event = 'transactionid' AND query LIKE '%chat_session_open%'`) == 1
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second open paused after its insert", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%chat_session_open%'`) == 1
	})
	// The first connection ends: its clean session goes.
	if err := ss.Drop(ctx, "phone", "n/p/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := pause.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second open, its first's session deleted meanwhile: %v", err)
	}
	var token string
	if err := pool.QueryRow(ctx, `SELECT conn_token FROM chat_session WHERE client_id = 'phone'`).Scan(&token); err != nil || token != "n/p/2" {
		t.Fatalf("the session after the second open: token %q, %v; want n/p/2's", token, err)
	}
}
