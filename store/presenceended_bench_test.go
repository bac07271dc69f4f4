package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// removalShape is a group of 200 one member leaves (conversation id,
// leaver) and the statements that build it and the others around it.
type removalShape struct {
	name         string
	conv, leaver int64
	build        []string
	listed       int
}

// removalShapes are the shapes of docs/benchmarks.md, "Presence on a
// removal", each in ids of its own.
var removalShapes = []removalShape{{
	name: "team", conv: 1_000_000, leaver: 100_001, listed: 0,
	// 200 users in 60 groups of all of them, and the group left.
	build: []string{members(`SELECT 1000000 + g, u FROM generate_series(0, 60) g, generate_series(100001, 100200) u`)},
}, {
	name: "dms", conv: 2_000_000, leaver: 200_001, listed: 199,
	// 200 users who share only the group, each in 60 direct
	// conversations with others.
	build: []string{
		members(`SELECT 2000000, u FROM generate_series(200001, 200200) u`),
		members(`SELECT 2000001 + (u - 200001) * 60 + k, x FROM generate_series(200001, 200200) u, generate_series(0, 59) k,
			LATERAL (VALUES (u), (5000000 + (u - 200001) * 60 + k)) d(x)`),
	},
}, {
	name: "500-users-100-groups", conv: 3_000_000, leaver: 300_001, listed: 53,
	// 500 users in 100 groups of 200 of them (group g: the 200 from
	// the 5g-th on, wrapping round), and a group of every other one of
	// them, 53 of whom share none of those groups with the leaver.
	build: []string{members(`SELECT 3000001 + g, 300001 + (g * 5 + i) % 500 FROM generate_series(0, 99) g, generate_series(0, 199) i
		UNION ALL SELECT 3000000, 300001 + i * 2 FROM generate_series(0, 199) i`)},
}, {
	name: "leaver-in-300-groups", conv: 4_000_000, leaver: 400_001, listed: 199,
	// The leaver in 300 groups of 199 users each, who are in nothing
	// else; the group's others in nothing else.
	build: []string{members(`SELECT 4000001 + g, x FROM generate_series(0, 299) g,
			LATERAL (SELECT 400001 UNION ALL SELECT 6000000 + g * 199 + i FROM generate_series(0, 198) i) m(x)
		UNION ALL SELECT 4000000, u FROM generate_series(400001, 400200) u`)},
}, {
	name: "leaver-direct-with-each", conv: 5_000_000, leaver: 500_001, listed: 0,
	// The leaver with a direct conversation with each of the others and
	// in 60 groups of 199 users in nothing else; the others each in 60
	// direct conversations with others.
	build: []string{
		members(`SELECT 5000000, u FROM generate_series(500001, 500200) u
			UNION ALL SELECT 5000001 + u - 500002, x FROM generate_series(500002, 500200) u, LATERAL (VALUES (500001), (u)) d(x)
			UNION ALL SELECT 5100000 + g, x FROM generate_series(0, 59) g,
				LATERAL (SELECT 500001 UNION ALL SELECT 7000000 + g * 199 + i FROM generate_series(0, 198) i) m(x)`),
		members(`SELECT 5200000 + (u - 500002) * 60 + k, x FROM generate_series(500002, 500200) u, generate_series(0, 59) k,
			LATERAL (VALUES (u), (8000000 + (u - 500002) * 60 + k)) d(x)`),
	},
}, {
	name: "leaver-in-60-groups-others-60-dms", conv: 6_000_000, leaver: 600_001, listed: 199,
	// The leaver in 60 groups of 199 users in nothing else; the others
	// each in 60 direct conversations with others.
	build: []string{
		members(`SELECT 6000000, u FROM generate_series(600001, 600200) u
			UNION ALL SELECT 6100000 + g, x FROM generate_series(0, 59) g,
				LATERAL (SELECT 600001 UNION ALL SELECT 9000000 + g * 199 + i FROM generate_series(0, 198) i) m(x)`),
		members(`SELECT 6200000 + (u - 600002) * 60 + k, x FROM generate_series(600002, 600200) u, generate_series(0, 59) k,
			LATERAL (VALUES (u), (9500000 + (u - 600002) * 60 + k)) d(x)`),
	},
}}

// members is the statements that insert the (conversation, user) rows
// sql selects, their conversations first (groups, direct ones when of
// two).
func members(sql string) string {
	return `WITH m(c, u) AS MATERIALIZED (` + sql + `),
	c AS (INSERT INTO conversation (id, type, title)
	      SELECT c, CASE WHEN count(*) = 2 THEN 'DIRECT' ELSE 'GROUP' END, 'bench' FROM m GROUP BY c RETURNING id)
	INSERT INTO conversation_member (conversation_id, user_id) SELECT m.c, m.u FROM m JOIN c ON c.id = m.c`
}

// explainSummary is the buffers the plan's top node read, its
// execution time, and whether it was compiled (JIT).
func explainSummary(plan []string) string {
	var buffers, took, jit string
	for _, line := range plan {
		line = strings.TrimSpace(line)
		if buffers == "" && strings.HasPrefix(line, "Buffers:") {
			buffers = line
		}
		if strings.HasPrefix(line, "Execution Time:") {
			took = line
		}
		if strings.HasPrefix(line, "JIT:") {
			jit = ", JIT"
		}
	}
	return took + ", " + buffers + jit
}

// BenchmarkPresenceEnded times the statement a removal reads whom it
// stops sharing presence with (store.PresenceEndedSQL: "probes"), and
// the one that read every small-conversation sharer of the removed user
// (store.PresenceEndedBySharersSQL: "sharers"), on each of
// removalShapes, as a removal's transaction runs them (the leaver's row
// deleted): first on tables without statistics (a fresh database; no
// autovacuum), then analyzed. Both must answer the same. With -v, each
// also logs one EXPLAIN ANALYZE's execution time and buffers.
//
//	go test -run '^$' -bench PresenceEnded -benchtime 100x -count 3 -v ./store/
func BenchmarkPresenceEnded(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.NewPool(b)
	for _, sql := range []string{
		`ALTER TABLE conversation SET (autovacuum_enabled = false)`,
		`ALTER TABLE conversation_member SET (autovacuum_enabled = false)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	for _, sh := range removalShapes {
		for _, sql := range sh.build {
			if _, err := pool.Exec(ctx, sql); err != nil {
				b.Fatalf("build %s: %v", sh.name, err)
			}
		}
	}
	for _, stats := range []string{"fresh", "analyzed"} {
		if stats == "analyzed" {
			if _, err := pool.Exec(ctx, `ANALYZE conversation, conversation_member`); err != nil {
				b.Fatal(err)
			}
		}
		for _, sh := range removalShapes {
			var answers [][]int64
			for _, st := range []struct{ name, sql, set string }{
				{"sharers", store.PresenceEndedBySharersSQL, ""},
				{"probes", store.PresenceEndedSQL, ""},
			} {
				b.Run(stats+"/"+sh.name+"/"+st.name, func(b *testing.B) {
					tx, err := pool.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					defer tx.Rollback(ctx)
					for _, sql := range []string{st.set, `DELETE FROM conversation_member WHERE conversation_id = $1 AND user_id = $2`} {
						if sql == "" {
							continue
						}
						args := []any{sh.conv, sh.leaver}
						if sql == st.set {
							args = nil
						}
						if _, err := tx.Exec(ctx, sql, args...); err != nil {
							b.Fatal(err)
						}
					}
					var listed []int64
					b.ResetTimer()
					for range b.N {
						rows, err := tx.Query(ctx, st.sql, sh.conv, sh.leaver, 200)
						if err != nil {
							b.Fatal(err)
						}
						if listed, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (int64, error) {
							var u int64
							var blocked, blocks bool
							return u, r.Scan(&u, &blocked, &blocks)
						}); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+st.sql, sh.conv, sh.leaver, 200)
					if err != nil {
						b.Fatal(err)
					}
					plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
					if err != nil {
						b.Fatal(err)
					}
					b.Logf("EXPLAIN ANALYZE: %s", explainSummary(plan))
					if len(listed) != sh.listed {
						b.Fatalf("%s lists %d members, want %d", sh.name, len(listed), sh.listed)
					}
					answers = append(answers, listed)
				})
			}
			if len(answers) == 2 && !slices.Equal(answers[0], answers[1]) {
				b.Fatalf("%s (%s): the statements answer %v and %v", sh.name, stats, answers[1], answers[0])
			}
		}
	}
}
