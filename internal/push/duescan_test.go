package push_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
)

// Every node asks whether a push is due every Tick, and counts the due
// ones once a second while its queue is full. Both read push_job_due_idx
// in order, whatever the heap looks like: never the table from its start,
// which reads every sent row lying before the due ones (and every row,
// when none is due but the statistics say many are).
func TestTheDueQuestionsReadTheDueIndexWhereverTheDueRowsLie(t *testing.T) {
	ctx := context.Background()
	const jobs = `INSERT INTO push_job (user_id, conversation_id, seq, count, sender_id, state, not_before, covered)
SELECT g, g, 1, 1, 1, $1, now() - interval '30 minutes' + g * interval '1 ms', '{[1,2)}' FROM generate_series(1, $2) g`
	layouts := []struct {
		name  string
		steps [][]any
		due   int64
	}{
		{"60,000 sent, then 40,000 due", [][]any{{jobs, "sent", 60000}, {jobs, "pending", 40000}, {"VACUUM ANALYZE push_job"}}, 40000},
		{"100,000 due, the first 60,000 of which were sent since", [][]any{
			{jobs, "pending", 100000}, {"UPDATE push_job SET state = 'sent' WHERE id <= 60000"}, {"VACUUM ANALYZE push_job"}}, 40000},
		{"none due, the statistics from when 100,000 were", [][]any{
			{"ALTER TABLE push_job SET (autovacuum_enabled = false)"},
			{jobs, "pending", 100000}, {"ANALYZE push_job"}, {"UPDATE push_job SET state = 'sent'"}, {"VACUUM push_job"}}, 0},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			pool := pgtest.NewPool(t)
			for _, s := range l.steps {
				if _, err := pool.Exec(ctx, s[0].(string), s[1:]...); err != nil {
					t.Fatalf("%s: %v", s[0], err)
				}
			}
			for _, q := range []struct {
				name string
				sql  string
				want int // rows of push_job it needs to read
			}{{"anyDueSQL", push.AnyDueSQL, min(int(l.due), 1)}, {"overflowSQL", push.OverflowSQL, min(int(l.due), 10000)}} {
				var plan []struct {
					Plan json.RawMessage `json:"Plan"`
				}
				if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.sql).Scan(&plan); err != nil || len(plan) != 1 {
					t.Fatalf("explain %s: %v", q.name, err)
				}
				seq, index, read := jobScans(t, plan[0].Plan)
				if seq || !index || read > q.want {
					t.Errorf("%s read %d push_job rows (sequential scan: %v, push_job_due_idx: %v), want %d through push_job_due_idx:\n%s",
						q.name, read, seq, index, q.want, plan[0].Plan)
				}
			}
			var due bool
			if err := pool.QueryRow(ctx, "SELECT EXISTS ("+push.AnyDueSQL+")").Scan(&due); err != nil || due != (l.due > 0) {
				t.Errorf("anyDueSQL answered a row: %v (%v), want %v", due, err, l.due > 0)
			}
			var n int64
			if err := pool.QueryRow(ctx, push.OverflowSQL).Scan(&n); err != nil || n != min(l.due, 10000) {
				t.Errorf("overflowSQL counted %d (%v), want %d", n, err, min(l.due, 10000))
			}
		})
	}
}

// jobScans walks a plan: whether it scans push_job sequentially, whether
// it reads push_job_due_idx, and how many push_job rows its scans read
// (returned, or removed by a filter).
func jobScans(t *testing.T, node json.RawMessage) (seq, index bool, read int) {
	t.Helper()
	var n struct {
		Type     string            `json:"Node Type"`
		Relation string            `json:"Relation Name"`
		Index    string            `json:"Index Name"`
		Rows     float64           `json:"Actual Rows"`
		Removed  float64           `json:"Rows Removed by Filter"`
		Loops    float64           `json:"Actual Loops"`
		Plans    []json.RawMessage `json:"Plans"`
	}
	if err := json.Unmarshal(node, &n); err != nil {
		t.Fatal(err)
	}
	if n.Relation == "push_job" {
		seq = n.Type == "Seq Scan"
		read = int((n.Rows + n.Removed) * n.Loops)
	}
	index = n.Index == "push_job_due_idx"
	for _, p := range n.Plans {
		s, i, r := jobScans(t, p)
		seq, index, read = seq || s, index || i, read+r
	}
	return seq, index, read
}
