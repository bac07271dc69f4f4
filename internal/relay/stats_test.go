package relay_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
)

// The relay measures its backlog every StatsInterval on its own
// connection, while it drains it: the measure reads at most StatsExact
// rows however long the backlog is (a count of every row read 2 million
// in 0.3-0.5 s of each 5 s), and is exact below that.
func TestTheBacklogMeasureReadsABoundedNumberOfOutboxRows(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	fill := func(n int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO outbox (msg_key, type, payload, created_at)
			SELECT (g % 100)::text, 'message.new', jsonb_build_object('type', 'message.new', 'seq', g), now()
			FROM generate_series(1, $1) g`, n); err != nil {
			t.Fatal(err)
		}
	}
	measure := func() (n int64) {
		t.Helper()
		var age float64
		if err := pool.QueryRow(ctx, relay.StatsSQL, relay.StatsExact).Scan(&n, &age); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fill(1234)
	if n := measure(); n != 1234 {
		t.Fatalf("a backlog of 1234 rows measured %d", n)
	}
	fill(60000 - 1234)
	if n := measure(); n < 60000 {
		t.Fatalf("a backlog of 60000 rows measured %d", n)
	}
	var plan []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+relay.StatsSQL, relay.StatsExact).Scan(&plan); err != nil || len(plan) != 1 {
		t.Fatalf("explain the backlog measure: %v", err)
	}
	if read := rowsRead(t, plan[0].Plan); read > relay.StatsExact+10 {
		t.Fatalf("the backlog measure read %d outbox rows of 60000, want at most %d", read, relay.StatsExact+10)
	}
}

// rowsRead sums what the plan's scans of the outbox returned.
func rowsRead(t *testing.T, node json.RawMessage) int {
	t.Helper()
	var n struct {
		Relation string            `json:"Relation Name"`
		Rows     float64           `json:"Actual Rows"`
		Loops    float64           `json:"Actual Loops"`
		Plans    []json.RawMessage `json:"Plans"`
	}
	if err := json.Unmarshal(node, &n); err != nil {
		t.Fatal(err)
	}
	read := 0
	if n.Relation == "outbox" {
		read += int(n.Rows * n.Loops)
	}
	for _, p := range n.Plans {
		read += rowsRead(t, p)
	}
	return read
}
