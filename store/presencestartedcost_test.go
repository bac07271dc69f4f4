package store_test

import (
	"os"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// Review probe (r61): presenceStartedSQL subtracts every small-conversation
// sharer of the joined users (EXCEPT), not only those in the conversation
// joined; a team of 200 that shares many groups pays for all of them on
// each new group. Logs the time of creating the next group of the same
// 200 members as the number of groups they share grows, and EXPLAIN
// ANALYZE of the statement.
//
// A probe, not a test: it asserts nothing and runs only with
// CHATD_REVIEW_PROBE=1 (about 30 s).
func TestProbePresenceStartedCostGrowsWithSharedGroups(t *testing.T) {
	if os.Getenv("CHATD_REVIEW_PROBE") == "" {
		t.Skip("a review probe: CHATD_REVIEW_PROBE=1 runs it")
	}
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventMemberAdded}}
	st, pool := newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
	members := make([]int64, 0, 199)
	for u := int64(2); u <= 200; u++ {
		members = append(members, u)
	}
	var last chat.Conversation
	for k := 1; k <= 60; k++ {
		start := time.Now()
		last = mustGroup(t, st, 1, members...)
		if k == 1 || k%10 == 0 {
			t.Logf("creating group %d of the same 200 members: %v", k, time.Since(start))
		}
	}
	start := time.Now()
	mustAdd(t, ctx, st, last.ID, 1, 5000, "")
	t.Logf("adding a stranger to one of them: %v", time.Since(start))
	g := mustGroup(t, st, 5001)
	start = time.Now()
	mustAdd(t, ctx, st, g.ID, 5001, 2, "")
	t.Logf("adding one of the 200 (in 60 groups) to a group of 1: %v", time.Since(start))

	all := append([]int64{1}, members...)
	// The same members' next group, before it exists: as CreateGroup runs
	// the statement (the conversation holds 200 members).
	next := mustGroup(t, st, 1, members...)
	for _, q := range []struct{ what, sql string }{
		{"as landed", store.PresenceStartedSQLForTest()},
		{"sharers narrowed to the conversation's members", strings.Replace(store.PresenceStartedSQLForTest(),
			"AND shm.conversation_id <> $1", "AND shm.conversation_id <> $1 AND sho.user_id IN (SELECT user_id FROM conversation_member WHERE conversation_id = $1)", 1)},
	} {
		start := time.Now()
		rows, err := pool.Query(ctx, q.sql, next.ID, all, 200)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("presenceStartedSQL %s, a group of the 200 who share 61 others: %d rows in %v", q.what, n, time.Since(start))
	}
	// A newcomer added to a group of 199 of the team: the member.added
	// lists the 199 and the newcomer as subjects, and each node with one
	// of them connected reads their Watchers in its tracker's round
	// (pushStarted).
	team := mustGroup(t, st, 1, members[:198]...)
	mustAdd(t, ctx, st, team.ID, 1, 7000, "")
	evs := rec.events()
	shown := evs[len(evs)-1].PresenceShown
	subjects := map[int64]bool{}
	for _, ss := range shown {
		for _, s := range ss {
			subjects[s] = true
		}
	}
	users := make([]int64, 0, len(subjects))
	for u := range subjects {
		users = append(users, u)
	}
	start = time.Now()
	if _, err := store.NewPresence(pool, time.Minute).Watchers(ctx, users, 200); err != nil {
		t.Fatal(err)
	}
	t.Logf("a newcomer added to a group of 199 of the team: pushStarted's Watchers of its %d subjects: %v", len(users), time.Since(start))
	rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+store.PresenceStartedSQLForTest(), next.ID, all, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		t.Log(line)
	}
}
