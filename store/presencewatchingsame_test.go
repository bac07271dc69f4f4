package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/store"
)

// TestWatchingAnswersAsReadingEveryPairAlikeDid: on random shapes of
// conversations (direct ones and groups of up to 12 of 30 users, some of
// them hiding their presence, some blocking others), Watching answers
// exactly what its statement answered read on every pair given, no
// conversation given (0) or one, at large-group sizes that make some of
// those conversations large and none: for the pairs of every member of
// every conversation with each of its other members both ways, no
// conversation given, as a removal's pairs are read (the member in all
// of them read from their side), and for random pairs, some with
// themselves and some twice, given no conversation, one of them, one
// that does not exist; and for a join's pairs, every member of each
// conversation with every other given that conversation, alone and with
// other pairs given it too.
func TestWatchingAnswersAsReadingEveryPairAlikeDid(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t)
	pr := store.NewPresence(pool, time.Minute)
	compared, watching, notWatching := 0, 0, 0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 64))
		convs := randomPresenceShape(t, ctx, pool, rng, seed)
		var batches [][3][]int64
		var prevJoin [3][]int64
		for _, c := range convs {
			members := membersOf(t, ctx, pool, c)
			var join [3][]int64
			for _, u := range members {
				var b [3][]int64
				for _, o := range members {
					if o != u {
						b[0], b[1], b[2] = append(b[0], u, o), append(b[1], o, u), append(b[2], 0, 0)
						join[0], join[1], join[2] = append(join[0], u), append(join[1], o), append(join[2], c)
					}
				}
				batches = append(batches, b)
			}
			// A join's pairs: every member with every other, given the
			// conversation; and with them the previous conversation's
			// pairs given this one too (members of both, of one, of
			// neither).
			batches = append(batches, join)
			mixed := [3][]int64{slices.Clone(join[0]), slices.Clone(join[1]), slices.Clone(join[2])}
			for i := range prevJoin[0] {
				mixed[0], mixed[1], mixed[2] = append(mixed[0], prevJoin[0][i]), append(mixed[1], prevJoin[1][i]), append(mixed[2], c)
			}
			batches = append(batches, mixed)
			prevJoin = join
		}
		for range 20 {
			var b [3][]int64
			for range 1 + rng.IntN(60) {
				s, w := int64(1+rng.IntN(presenceUsers)), int64(1+rng.IntN(presenceUsers))
				var v int64
				switch rng.IntN(4) {
				case 1:
					v = convs[rng.IntN(len(convs))]
				case 2:
					v = -1
				}
				b[0], b[1], b[2] = append(b[0], s, s), append(b[1], w, w), append(b[2], v, 0)
			}
			batches = append(batches, b)
		}
		for _, b := range batches {
			for _, large := range []int{4, 8, 200} {
				now, err := pr.Watching(ctx, b[0], b[1], b[2], large)
				if err != nil {
					t.Fatal(err)
				}
				before := watchingByEveryPair(t, ctx, pool, b, large)
				if fmt.Sprint(now) != fmt.Sprint(before) {
					t.Fatalf("seed %d: pairs %v %v via %v (large group %d): Watching answers %v, reading every pair answered %v", seed, b[0], b[1], b[2], large, now, before)
				}
				compared++
				n := 0
				for _, ws := range now {
					n += len(ws)
				}
				watching += n
				notWatching += len(b[0]) - n
			}
		}
	}
	// Not a vacuous comparison: the pairs give both answers.
	if watching == 0 || notWatching == 0 {
		t.Fatalf("%d sets of pairs compared, %d pairs watching, %d not: the shapes must give both", compared, watching, notWatching)
	}
	t.Logf("%d sets of pairs compared, %d pairs watching, %d not", compared, watching, notWatching)
}

// watchingByEveryPair reads store.WatchingSQL on every pair of b
// (subjects, watchers, via), by subject in the pairs' order.
func watchingByEveryPair(t *testing.T, ctx context.Context, pool *pgxpool.Pool, b [3][]int64, large int) map[int64][]int64 {
	t.Helper()
	rows, err := pool.Query(ctx, store.WatchingSQL, b[0], b[1], b[2], large)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]int64{}
	var s, w int64
	if _, err := pgx.ForEachRow(rows, []any{&s, &w}, func() error {
		out[s] = append(out[s], w)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
