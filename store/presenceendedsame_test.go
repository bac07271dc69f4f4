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

// TestARemovalsPresenceStatementAnswersAsReadingEverySharerDid: on
// random shapes of conversations (direct ones and groups of up to 12 of
// 30 users, some of them hiding their presence, some blocking others),
// the statement a removal reads whom it stops sharing presence with
// answers, for every member of every conversation removed in turn (in
// a transaction rolled back), exactly what the statement that read every
// small-conversation sharer of the removed user answered, at large-group
// sizes that make some of those conversations large and none. Between
// them the shapes make every way the statement decides happen: a
// candidate found among the members of a smaller conversation, one found
// by probing a larger one, one in few conversations looked up from their
// side, and one who shares nothing else.
func TestARemovalsPresenceStatementAnswersAsReadingEverySharerDid(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t)
	compared, listed, kept := 0, 0, 0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 62))
		convs := randomPresenceShape(t, ctx, pool, rng, seed)
		for _, c := range convs {
			members := membersOf(t, ctx, pool, c)
			for _, u := range members {
				for _, large := range []int{4, 8, 200} {
					now, before := removalAnswers(t, ctx, pool, c, u, large)
					if !slices.Equal(now, before) {
						t.Fatalf("seed %d: user %d leaving conversation %d (large group %d): the statement answers %v, reading every sharer answered %v", seed, u, c, large, now, before)
					}
					compared++
					listed += len(now)
					kept += len(members) - 1 - len(now)
				}
			}
		}
	}
	// Not a vacuous comparison: the shapes give both answers.
	if listed == 0 || kept == 0 {
		t.Fatalf("%d removals compared, %d members listed, %d not: the shapes must give both", compared, listed, kept)
	}
	t.Logf("%d removals compared, %d members listed, %d not", compared, listed, kept)
}

// removalAnswers deletes u's membership of c in a transaction, reads
// both statements' answers (each row as "user blocked blocks"), and
// rolls back.
func removalAnswers(t *testing.T, ctx context.Context, pool *pgxpool.Pool, c, u int64, large int) (now, before []string) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM conversation_member WHERE conversation_id = $1 AND user_id = $2`, c, u); err != nil {
		t.Fatal(err)
	}
	read := func(sql string) []string {
		rows, err := tx.Query(ctx, sql, c, u, large)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var other int64
			var blocked, blocks bool
			err := r.Scan(&other, &blocked, &blocks)
			return fmt.Sprint(other, blocked, blocks), err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	return read(store.PresenceEndedSQL), read(store.PresenceEndedBySharersSQL)
}
