package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/store"
)

// TestAJoinsPresenceStatementAnswersAsJoiningConversationsBackDid: on
// random shapes of conversations (direct ones and groups of up to 12 of
// 30 users, some of them hiding their presence, some blocking others),
// the statement a join reads who may now see whose presence answers,
// for every conversation with each member joined alone, with all of
// them joined (a create) and with a random half joined, exactly what
// the statement that joined each conversation's bits back to its rows
// answered, at large-group sizes that make some of the conversations
// large and none.
func TestAJoinsPresenceStatementAnswersAsJoiningConversationsBackDid(t *testing.T) {
	t.Parallel()
	if store.PresenceStartedSQL == store.PresenceStartedByJoinSQL {
		t.Fatal("the statement before is the statement now: nothing compared")
	}
	ctx := testCtx(t)
	_, pool := newStore(t)
	compared, listed, kept := 0, 0, 0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 63))
		convs := randomPresenceShape(t, ctx, pool, rng, seed)
		for _, c := range convs {
			members := membersOf(t, ctx, pool, c)
			joins := [][]int64{members}
			for _, u := range members {
				joins = append(joins, []int64{u})
			}
			var half []int64
			for _, u := range members {
				if rng.IntN(2) == 0 {
					half = append(half, u)
				}
			}
			if len(half) > 0 {
				joins = append(joins, half)
			}
			for _, joined := range joins {
				for _, large := range []int{4, 8, 200} {
					now := joinAnswers(t, ctx, pool, store.PresenceStartedSQL, c, joined, large)
					before := joinAnswers(t, ctx, pool, store.PresenceStartedByJoinSQL, c, joined, large)
					if !slices.Equal(now, before) {
						t.Fatalf("seed %d: %v joined conversation %d (large group %d): the statement answers %v, joining back answered %v", seed, joined, c, large, now, before)
					}
					compared++
					listed += len(now)
					if len(now) < len(joined)*(len(members)-1) {
						kept++
					}
				}
			}
		}
	}
	// Not a vacuous comparison: the shapes give pairs told and pairs not.
	if listed == 0 || kept == 0 {
		t.Fatalf("%d joins compared, %d pairs listed, %d joins not listing every pair: the shapes must give both", compared, listed, kept)
	}
	t.Logf("%d joins compared, %d pairs listed, %d joins not listing every pair", compared, listed, kept)
}

// joinAnswers reads sql's answer (each row as "watcher subject") for
// joined having joined c.
func joinAnswers(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string, c int64, joined []int64, large int) []string {
	t.Helper()
	rows, err := pool.Query(ctx, sql, c, joined, large)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var watcher, subject int64
		err := r.Scan(&watcher, &subject)
		return fmt.Sprint(watcher, subject), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
