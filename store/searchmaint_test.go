package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/testkit"
)

// New messages go to the search indexes' pending lists; the maintainer
// merges them, and what was merged is still found, by both plans.
func TestSearchMaintenanceMergesPendingMessagesWhichStayFindable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	for i := range 20 {
		mustSend(t, st, g.ID, 2, fmt.Sprintf("quarterly budget review %d 预算会议", i))
	}
	merged, err := st.CleanSearchIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if merged == 0 {
		t.Fatal("no pending pages merged after 20 sends: the indexes do not use fast update")
	}
	if again, err := st.CleanSearchIndexes(ctx); err != nil || again != 0 {
		t.Fatalf("second merge: %d pages, %v; want 0", again, err)
	}
	for i, p := range plans {
		for _, q := range []string{"budget", "预算", "arterl"} {
			if got := hitBodies(t, p, 1, q); len(got) != 20 {
				t.Errorf("plan %d: %q after the merge: %d hits, want 20", i, q, len(got))
			}
		}
	}
}

// The maintainer merges what sends leave pending, by itself, and returns
// nil when its context ends.
func TestSearchMaintenanceMergesInTheBackgroundUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	// pgstattuple reads the pending pages without merging them.
	if _, err := pool.Exec(testCtx(t), `CREATE EXTENSION IF NOT EXISTS pgstattuple`); err != nil {
		t.Skipf("pgstattuple is not available: %v", err)
	}
	pending := func() int64 {
		var n int64
		if err := pool.QueryRow(testCtx(t), `SELECT (SELECT pending_pages FROM pgstatginindex('message_search_idx'))
			+ (SELECT pending_pages FROM pgstatginindex('message_body_trgm_idx'))`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	g := mustGroup(t, st, 1, 2)
	mustSend(t, st, g.ID, 1, "merged in the background")
	if pending() == 0 {
		t.Fatal("a send left nothing pending: the indexes do not use fast update")
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- st.RunSearchMaintenance(ctx, 10*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	testkit.WaitFor(t, 10*time.Second, "the maintainer to empty the pending lists", func() bool { return pending() == 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunSearchMaintenance: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunSearchMaintenance does not return after its context ends")
	}
	if got := hitBodies(t, st, 2, "background"); len(got) != 1 {
		t.Fatalf("after the merges: %v", got)
	}
}

// The plan follows the words: a word most messages hold, or a prefix of
// one or two characters, is tested on the caller's messages directly; a
// rare word goes through the indexes; a caller who sees few messages is
// always scanned, one who sees very many never.
func TestSearchPlanScansForCommonWordsAndUsesTheIndexesForRareOnes(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	mustExec(t, ctx, pool, `INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)
		SELECT $1, i, 2, gen_random_uuid(), CASE WHEN i % 1000 = 0 THEN 'a rarity ' ELSE 'the usual ' END || i || ' 今天开会',
		       now(), i FROM generate_series(1, 60000) i`, g.ID)
	mustExec(t, ctx, pool, `ANALYZE message`)
	for _, c := range []struct {
		q       string
		visible int64
		scan    bool
	}{
		{"usual", 3000, true},
		{"开会", 3000, true},
		{"us", 3000, true},
		{"rarity", 3000, false},
		{"usual rarity", 3000, false},
		{"rarity", 1000, true},
		{"usual", 60000, false},
	} {
		terms, err := chat.ParseSearchTerms(c.q)
		if err != nil {
			t.Fatal(err)
		}
		scan, err := st.SearchByScan(ctx, terms, c.visible)
		if err != nil {
			t.Fatal(err)
		}
		if scan != c.scan {
			t.Errorf("%q seen by a caller of %d messages: scan %v, want %v", c.q, c.visible, scan, c.scan)
		}
	}
}
