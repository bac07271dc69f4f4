package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

func TestSessionsAreOwnedByOneUserAndExpireOnlyWhenNobodyHoldsThem(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	open := func(id string, user int64, persistent bool, expiry time.Duration) {
		t.Helper()
		if _, err := ss.Open(ctx, id, "", user, persistent, false, expiry); err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
	}
	open("offline-expired", 1, true, time.Minute)
	open("offline-fresh", 1, true, time.Hour)
	open("here", 2, true, time.Minute)
	open("elsewhere", 3, true, time.Minute)
	if _, err := ss.Open(ctx, "here", "", 9, true, false, time.Minute); !errors.Is(err, chat.ErrClientIDTaken) {
		t.Fatalf("another user's client id: %v", err)
	}
	// Everyone was last seen two hours ago; "elsewhere" is connected to a
	// node that is alive.
	mustExec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	mustExec(`UPDATE chat_session SET last_seen_at = now() - interval '2 hours'`)
	mustExec(`UPDATE chat_session SET last_seen_at = now() WHERE client_id = 'offline-fresh'`)
	mustExec(`INSERT INTO chat_node (node_id, heartbeat_at) VALUES ('node-b', now())`)
	mustExec(`UPDATE chat_session SET node_id = 'node-b' WHERE client_id = 'elsewhere'`)
	n, err := ss.Expire(ctx, []string{"here"})
	if err != nil || n != 1 {
		t.Fatalf("expired %d sessions (%v), want 1", n, err)
	}
	var left []string
	rows, _ := pool.Query(ctx, `SELECT client_id FROM chat_session ORDER BY client_id`)
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		left = append(left, id)
	}
	rows.Close()
	want := []string{"elsewhere", "here", "offline-fresh"}
	if len(left) != len(want) || left[0] != want[0] || left[1] != want[1] || left[2] != want[2] {
		t.Fatalf("sessions left %v, want %v", left, want)
	}
	// A node that died long ago no longer protects its sessions.
	mustExec(`UPDATE chat_node SET heartbeat_at = now() - interval '1 hour'`)
	if n, err := ss.Expire(ctx, []string{"here"}); err != nil || n != 1 {
		t.Fatalf("session of a dead node: expired %d (%v), want 1", n, err)
	}
	// No client connected here: a nil list is none, not "unknown".
	if n, err := ss.Expire(ctx, nil); err != nil || n != 1 {
		t.Fatalf("with nobody connected: expired %d (%v), want 1 (\"here\")", n, err)
	}
}

func TestSessionSubscriptionsResumeWithTheSessionOnly(t *testing.T) {
	ctx := context.Background()
	ss := store.NewSessions(pgtest.NewPool(t))
	open := func(persistent, clean bool) chat.OpenedSession {
		t.Helper()
		o, err := ss.Open(ctx, "phone", "", 1, persistent, clean, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := open(true, false); o.Resumed || o.Present {
		t.Fatalf("a new session: %+v", o)
	}
	subs := []chat.Subscription{{Filter: "chat/v1/user/1/events", QoS: 1}, {Filter: "chat/v1/user/1/#", QoS: 0}}
	if err := ss.SaveSubscriptions(ctx, "phone", "", subs); err != nil {
		t.Fatal(err)
	}
	if o := open(true, false); !o.Resumed || !o.Present || len(o.Subscriptions) != 2 || o.Subscriptions[0] != subs[0] || o.Subscriptions[1] != subs[1] {
		t.Fatalf("resumed: %+v, want present with %+v", o, subs)
	}
	if o := open(true, true); o.Resumed || o.Present || len(o.Subscriptions) != 0 {
		t.Fatalf("clean start: %+v", o)
	}
	if o := open(true, false); !o.Present || len(o.Subscriptions) != 0 {
		t.Fatalf("resumed after a clean start: %+v, want present without subscriptions", o)
	}
	// A non-persistent session records nothing; a later persistent one
	// starts afresh.
	if o := open(false, false); o.Present {
		t.Fatalf("non-persistent: %+v", o)
	}
	if err := ss.SaveSubscriptions(ctx, "phone", "", subs); err != nil {
		t.Fatal(err)
	}
	if o := open(true, false); o.Resumed || o.Present || len(o.Subscriptions) != 0 {
		t.Fatalf("persistent after a non-persistent one: %+v", o)
	}
}

// A session opened by a connection of another chatd process than the one
// that held it announces the takeover (store.WatchTakeovers) with the old
// connection's token, so that its node closes it; a takeover within one
// process (mochi closes the old connection itself) and a resume after the
// old connection ended (Touch) announce nothing.
func TestOpeningASessionHeldByAnotherProcessAnnouncesTheTakeoverOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	type notice struct{ clientID, token string }
	got := make(chan notice, 64)
	done := make(chan error, 1)
	go func() {
		done <- ss.WatchTakeovers(ctx, func(c, tok string) { got <- notice{c, tok} }, slog.Default())
	}()
	open := func(id, token string) {
		t.Helper()
		if _, err := ss.Open(ctx, id, token, 1, true, false, time.Hour); err != nil {
			t.Fatalf("open %s as %s: %v", id, token, err)
		}
	}
	// Until the watcher listens, takeovers of "probe" go unheard.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		open("probe", fmt.Sprintf("node-%d/p/1", i))
		select {
		case n := <-got:
			if n.clientID != "probe" {
				t.Fatalf("notice %+v", n)
			}
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the watcher never heard a takeover")
			}
			continue
		}
		break
	}
	for len(got) > 0 {
		<-got
	}
	open("phone", "node-a/p1/1")
	open("phone", "node-a/p1/2") // the same process
	open("phone", "node-b/p2/1") // another one
	if err := ss.Touch(ctx, "phone", "node-b/p2/1", time.Hour); err != nil {
		t.Fatal(err)
	}
	open("phone", "node-a/p1/3") // after that connection ended
	open("sentinel", "node-x/p/1")
	open("sentinel", "node-y/p/1")
	want := []notice{{"phone", "node-a/p1/2"}, {"sentinel", "node-x/p/1"}}
	for i, w := range want {
		select {
		case n := <-got:
			if n != w {
				t.Fatalf("notice %d = %+v, want %+v", i, n, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notice %d (%+v) never came", i, w)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchTakeovers: %v", err)
	}
}

// A persistent session whose expiry ran out after its last connection
// ended is gone for its client (MQTT-3.1.2-23 keeps a session only until
// its expiry), though the sweep that deletes it runs only every minute: a
// resume then starts a new session (session present 0), not the old one.
// One whose expiry has not run out resumes.
func TestAnExpiredSessionIsNotResumedBeforeTheSweepDeletesIt(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	ss := store.NewSessions(pool)
	for _, expired := range []bool{false, true} {
		id := fmt.Sprintf("phone-expired-%v", expired)
		if _, err := ss.Open(ctx, id, "n/p/1", 1, true, false, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := ss.Touch(ctx, id, "n/p/1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if expired {
			if _, err := pool.Exec(ctx, `UPDATE chat_session SET last_seen_at = now() - interval '61 seconds' WHERE client_id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
		o, err := ss.Open(ctx, id, "n/p/2", 1, true, false, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if o.Present == expired {
			t.Fatalf("expired=%v: session present = %v", expired, o.Present)
		}
	}
}

// A leave records, for each persistent session of the user (connected or
// not; a non-persistent one is owed nothing after it ends), the last seq
// it is owed: Cursors returns the conversation with End set while the
// session has not acknowledged up to it, from its cursor, or from the
// join when it never acknowledged anything there. Once the user is a
// member again the cursor reads as a member's.
func TestALeaveTellsEachPersistentSessionOfTheUserWhatItIsStillOwed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	ss := store.NewSessions(pool)
	for _, o := range []struct {
		id         string
		persistent bool
	}{{"phone", true}, {"tablet", true}, {"web", false}} {
		if _, err := ss.Open(ctx, o.id, "", 2, o.persistent, false, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	conv := mustGroup(t, st, 1, 2) // after the opens: no stored cursor
	join := queryInt(t, pool, `SELECT join_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv.ID)
	sendN(t, st, conv.ID, 1, 4, "owed")
	if err := ss.SaveCursors(ctx, []chat.Cursor{{ClientID: "phone", ConversationID: conv.ID, Seq: join + 2}}); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, conv.ID, 1, 2, "remove user 2")
	sendN(t, st, conv.ID, 1, 1, "not owed")
	end := join + 4
	for _, tc := range []struct {
		id     string
		stored bool
		want   *chat.ConvCursor
	}{
		{"phone", true, &chat.ConvCursor{ConversationID: conv.ID, Delivered: join + 2, LastSeq: end + 2, End: end, MemberCount: 1}},
		{"tablet", true, &chat.ConvCursor{ConversationID: conv.ID, Delivered: join, LastSeq: end + 2, End: end, MemberCount: 1}},
		{"web", false, nil},
	} {
		cs, err := ss.Cursors(ctx, tc.id, 2, tc.stored)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want == nil && len(cs) != 0:
			t.Errorf("%s: %+v, want nothing", tc.id, cs)
		case tc.want != nil && (len(cs) != 1 || !reflect.DeepEqual(cs[0], *tc.want)):
			t.Errorf("%s: %+v, want %+v", tc.id, cs, *tc.want)
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM session_cursor WHERE client_id = 'web'`); n != 0 {
		t.Errorf("the non-persistent session got %d cursor rows", n)
	}
	// Acknowledged up to the leave: nothing is owed any more.
	if err := ss.SaveCursors(ctx, []chat.Cursor{{ClientID: "phone", ConversationID: conv.ID, Seq: end}}); err != nil {
		t.Fatal(err)
	}
	if cs, err := ss.Cursors(ctx, "phone", 2, true); err != nil || len(cs) != 0 {
		t.Errorf("after acknowledging up to the leave: %+v %v", cs, err)
	}
	// Added back: the phone, which acknowledged the old membership's
	// entries, reads a member's cursor at the new join; the tablet, which
	// did not, still finishes them first (End), then goes on after the
	// join.
	mustAdd(t, ctx, st, conv.ID, 1, 2, chat.RoleMember)
	for _, tc := range []struct {
		id   string
		want chat.ConvCursor
	}{
		{"phone", chat.ConvCursor{ConversationID: conv.ID, Delivered: end + 2, LastSeq: end + 3, JoinSeq: end + 2, MemberCount: 2}},
		{"tablet", chat.ConvCursor{ConversationID: conv.ID, Delivered: join, LastSeq: end + 3, JoinSeq: end + 2, MemberCount: 2, End: end}},
	} {
		cs, err := ss.Cursors(ctx, tc.id, 2, true)
		if err != nil || len(cs) != 1 || !reflect.DeepEqual(cs[0], tc.want) {
			t.Errorf("added back, %s: %+v %v, want %+v", tc.id, cs, err, tc.want)
		}
	}
}

// A user removed, added back and removed again (and added back once more)
// while a session is behind: each membership the session has not
// acknowledged comes back from Cursors, oldest first (End, then Rejoins,
// then JoinSeq); the second removal does not overwrite what the first one
// owed. One that acknowledged past a membership is owed only what follows.
func TestASessionBehindIsOwedEveryMembershipItHasNotAcknowledgedAcrossRemovalsAndReAdds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	ss := store.NewSessions(pool)
	for _, id := range []string{"phone", "tablet", "laptop"} {
		if _, err := ss.Open(ctx, id, "", 2, true, false, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	conv := mustGroup(t, st, 1, 2)
	joinSeq := func() int64 {
		return queryInt(t, pool, `SELECT join_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv.ID)
	}
	lastSeq := func() int64 { return queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv.ID) }
	save := func(id string, seq int64) {
		t.Helper()
		if err := ss.SaveCursors(ctx, []chat.Cursor{{ClientID: id, ConversationID: conv.ID, Seq: seq}}); err != nil {
			t.Fatal(err)
		}
	}
	j1 := joinSeq()
	sendN(t, st, conv.ID, 1, 2, "first membership")
	end1 := lastSeq()
	mustRemove(t, ctx, st, conv.ID, 1, 2, "first removal")
	sendN(t, st, conv.ID, 1, 1, "away")
	mustAdd(t, ctx, st, conv.ID, 1, 2, chat.RoleMember)
	j2 := joinSeq()
	sendN(t, st, conv.ID, 1, 2, "second membership")
	save("tablet", end1) // the first membership's entries, all of them
	save("laptop", j2+1) // into the second membership
	end2 := lastSeq()
	mustRemove(t, ctx, st, conv.ID, 1, 2, "second removal")
	sendN(t, st, conv.ID, 1, 1, "away again")

	type owed struct {
		delivered, end int64
		rejoins        []chat.Span
		join           int64
	}
	check := func(when string, want map[string]owed) {
		t.Helper()
		for id, w := range want {
			cs, err := ss.Cursors(ctx, id, 2, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 {
				t.Errorf("%s, %s: %+v, want one cursor", when, id, cs)
				continue
			}
			c := cs[0]
			if got := (owed{c.Delivered, c.End, c.Rejoins, c.JoinSeq}); !reflect.DeepEqual(got, w) {
				t.Errorf("%s, %s: %+v, want %+v", when, id, got, w)
			}
		}
	}
	check("removed twice", map[string]owed{
		"phone":  {j1, end1, []chat.Span{{Join: j2, End: end2}}, 0},
		"tablet": {j2, end2, nil, 0},
		"laptop": {j2 + 1, end2, nil, 0},
	})
	mustAdd(t, ctx, st, conv.ID, 1, 2, chat.RoleMember)
	j3 := joinSeq()
	check("added back again", map[string]owed{
		"phone":  {j1, end1, []chat.Span{{Join: j2, End: end2}}, j3},
		"tablet": {j2, end2, nil, j3},
	})
	save("phone", end1) // acknowledged the first membership's entries
	check("the first membership acknowledged", map[string]owed{"phone": {j2, end2, nil, j3}})
	save("phone", end2)
	check("both acknowledged", map[string]owed{"phone": {j3, 0, nil, j3}})
}

// A cursor flush that comes late (the old connection's node flushing after
// the session resumed elsewhere) does not bring back the cursor row of a
// conversation the user left, which the resume deleted once everything
// owed was acknowledged; a cursor row still finishing a leave moves on.
func TestALateCursorFlushDoesNotBringBackTheCursorOfAConversationTheUserLeft(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	ss := store.NewSessions(pool)
	if _, err := ss.Open(ctx, "phone", "", 2, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	left, owing := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 2)
	joinSeq := func(conv int64) int64 {
		return queryInt(t, pool, `SELECT join_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv)
	}
	end, owed := joinSeq(left.ID)+3, joinSeq(owing.ID)+3
	sendN(t, st, left.ID, 1, 3, "owed")
	sendN(t, st, owing.ID, 1, 3, "owed")
	mustRemove(t, ctx, st, left.ID, 1, 2, "remove user 2")
	mustRemove(t, ctx, st, owing.ID, 1, 2, "remove user 2")
	if err := ss.SaveCursors(ctx, []chat.Cursor{{ClientID: "phone", ConversationID: left.ID, Seq: end}}); err != nil {
		t.Fatal(err)
	}
	// Resumed: the served cursor of the left conversation goes.
	if _, err := ss.Open(ctx, "phone", "", 2, true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	rows := `SELECT count(*) FROM session_cursor WHERE client_id = 'phone' AND conversation_id = $1`
	if n := queryInt(t, pool, rows, left.ID); n != 0 {
		t.Fatalf("the resume kept %d cursor rows of the left conversation", n)
	}
	late := []chat.Cursor{{ClientID: "phone", ConversationID: left.ID, Seq: end}, {ClientID: "phone", ConversationID: owing.ID, Seq: owed - 1}}
	if err := ss.SaveCursors(ctx, late); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, rows, left.ID); n != 0 {
		t.Errorf("a late flush brought back %d cursor rows of the left conversation", n)
	}
	cs, err := ss.Cursors(ctx, "phone", 2, true)
	if err != nil || len(cs) != 1 || cs[0].ConversationID != owing.ID || cs[0].Delivered != owed-1 || cs[0].End != owed {
		t.Fatalf("cursors %+v %v, want conversation %d still owed up to %d from %d", cs, err, owing.ID, owed, owed-1)
	}
}
