package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// inLargeGroups puts user in groups groups of size members each (set-based,
// as a user of many groups at the member cap would be) and in one group
// with user 2 alone; it returns the large groups.
func inLargeGroups(t *testing.T, ctx context.Context, pool *pgxpool.Pool, user int64, groups, size int) []int64 {
	t.Helper()
	mustExec(t, ctx, pool, `
		WITH c AS (INSERT INTO conversation (type, title) VALUES ('GROUP', 'pair') RETURNING id)
		INSERT INTO conversation_member (conversation_id, user_id, role) SELECT c.id, u, 'member' FROM c, unnest(ARRAY[$1, 2]::bigint[]) u`, user)
	var ids []int64
	rows, err := pool.Query(ctx, `
		WITH c AS (INSERT INTO conversation (type, title) SELECT 'GROUP', 'large' FROM generate_series(1, $1) RETURNING id),
		     m AS (INSERT INTO conversation_member (conversation_id, user_id, role)
		           SELECT c.id, CASE WHEN u = 1 THEN $3 ELSE 1000 + u END, 'member' FROM c, generate_series(1, $2) u)
		SELECT id FROM c ORDER BY id`, groups, size, user)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, pool, `ANALYZE conversation, conversation_member`)
	return ids
}

// memberRowsRead is how many entries of conversation_member's primary key
// (by conversation: a group's member list) read went through.
func memberRowsRead(t *testing.T, url string, read func(probe *pgxpool.Pool)) int64 {
	t.Helper()
	return poolIndexesStat(t, url, []string{"conversation_member_pkey"}, "idx_tup_read", read)
}

// A connect lists the user's conversations with their sizes (delivery
// treats a large group apart) without reading the member list of each:
// in 20 groups of 300 members it reads no member row of theirs, where
// counting them read all 6,000.
func TestAConnectReadsTheSizesOfTheUsersGroupsWithoutTheirMemberLists(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, _ := storeAndURL(t)
	large := inLargeGroups(t, ctx, pool, 1, 20, 300)
	read := memberRowsRead(t, url, func(probe *pgxpool.Pool) {
		cs, err := store.NewSessions(probe).Cursors(ctx, "phone", 1, true)
		if err != nil {
			t.Fatal(err)
		}
		sizes := map[int64]int{}
		for _, c := range cs {
			sizes[c.ConversationID] = c.MemberCount
		}
		if len(cs) != len(large)+1 || sizes[large[0]] != 300 || sizes[large[0]-1] != 2 {
			t.Errorf("cursors %+v; want 21 conversations, the large ones of 300 members, the pair of 2", cs)
		}
	})
	if read > 20 {
		t.Errorf("the connect's cursors read %d entries of the groups' member lists; want none (a group's size is kept with it)", read)
	}
}

// Who sees a user's presence leaves out the groups above the size limit
// without reading their member lists: in 20 groups of 300 members (above
// a limit of 100), it reads the pair's members alone, where counting
// each group's members read all 6,000.
func TestThePresenceAudienceLeavesOutLargeGroupsWithoutReadingTheirMembers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, _ := storeAndURL(t)
	inLargeGroups(t, ctx, pool, 1, 20, 300)
	read := memberRowsRead(t, url, func(probe *pgxpool.Pool) {
		got, err := store.NewPresence(probe, time.Minute).Watchers(ctx, []int64{1}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[1]) != 1 || got[1][0] != 2 {
			t.Errorf("watchers of user 1: %v; want user 2 alone (the large groups' members do not watch)", got)
		}
		st := store.New(probe, chat.DefaultLimits())
		defer func() { _ = st.Close(ctx) }()
		watchers, err := st.ProfileAudience(ctx, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(watchers.Whole) != 2 {
			t.Errorf("profile watchers of user 1: %v; want 1 and 2", watchers)
		}
	})
	if read > 20 {
		t.Errorf("the presence and profile audiences read %d entries of the groups' member lists; want the pair's (a group's size is kept with it)", read)
	}
}
