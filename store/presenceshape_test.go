package store_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// presenceUsers is how many users randomPresenceShape's conversations
// are made of.
const presenceUsers = 30

// randomPresenceShape empties pool's conversations, settings and blocks
// and makes a random shape of them for the presence statements'
// comparisons: conversations of presenceUsers users, denser as seed
// grows (from mostly direct conversations to groups of up to 12 only),
// some users hiding their presence, some blocking another; analyzed for
// odd seeds, so that both statements are planned with statistics and
// without. It returns the conversations' ids.
func randomPresenceShape(t *testing.T, ctx context.Context, pool *pgxpool.Pool, rng *rand.Rand, seed uint64) []int64 {
	t.Helper()
	base := int64(seed+1) * 1000
	mustExec(t, ctx, pool, `TRUNCATE conversation, conversation_member, user_settings, user_block CASCADE`)
	var convs []int64
	for i := range 20 + 15*int(seed) {
		size := 2
		if rng.IntN(3) > 0 || seed == 3 {
			size = 3 + rng.IntN(10)
		}
		kind := "GROUP"
		if size == 2 {
			kind = "DIRECT"
		}
		id := base + int64(i)
		mustExec(t, ctx, pool, `INSERT INTO conversation (id, type, title) VALUES ($1, $2, 'g')`, id, kind)
		for _, m := range rng.Perm(presenceUsers)[:size] {
			mustExec(t, ctx, pool, `INSERT INTO conversation_member (conversation_id, user_id) VALUES ($1, $2)`, id, int64(m+1))
		}
		convs = append(convs, id)
	}
	for u := int64(1); u <= presenceUsers; u++ {
		if rng.IntN(8) == 0 {
			mustExec(t, ctx, pool, `INSERT INTO user_settings (user_id, presence) VALUES ($1, false)`, u)
		}
		if rng.IntN(4) == 0 {
			mustExec(t, ctx, pool, `INSERT INTO user_block (blocker_id, blocked_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, u, int64(1+(int(u)+rng.IntN(presenceUsers-1))%presenceUsers))
		}
	}
	if seed%2 == 1 {
		mustExec(t, ctx, pool, `ANALYZE conversation, conversation_member`)
	}
	return convs
}

// membersOf reads conversation c's members, in id order.
func membersOf(t *testing.T, ctx context.Context, pool *pgxpool.Pool, c int64) []int64 {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT user_id FROM conversation_member WHERE conversation_id = $1 ORDER BY user_id`, c)
	if err != nil {
		t.Fatal(err)
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return members
}
