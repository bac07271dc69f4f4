package store_test

import (
	"regexp"
	"slices"
	"strconv"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A word that is rare but made of common trigrams ("nenene": "nen" and
// "ene" are everywhere) is found by intersecting the trigram index's
// candidates with the caller's conversations before any row is read (or
// by reading the caller's own messages): the messages of other
// conversations that merely share its trigrams are never fetched.
func TestARareWordOfCommonTrigramsReadsNoRowOfOtherConversations(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	// The caller is in 100 conversations of 200 messages, four of them
	// "a nenene"; another conversation holds 50,000 messages with "nen"
	// and "ene" but never the word.
	var mine []int64
	for range 100 {
		mine = append(mine, mustGroup(t, st, 1, 2).ID)
	}
	others := mustGroup(t, st, 3, 4)
	mustExec(t, ctx, pool, `INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)
		SELECT $1, i, 3, gen_random_uuid(), 'nenu ene ' || i, now(), i FROM generate_series(1, 50000) i`, others.ID)
	mustExec(t, ctx, pool, `INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)
		SELECT c, i, 2, gen_random_uuid(), CASE WHEN c = $2 AND i % 50 = 0 THEN 'a nenene ' ELSE 'plain words ' END || i, now(), i
		FROM unnest($1::bigint[]) c, generate_series(1, 200) i`, mine, mine[0])
	// As sends keep them: the plan is chosen by how many messages the
	// caller can see.
	mustExec(t, ctx, pool, `UPDATE conversation c SET last_seq = n, message_count = n
		FROM (SELECT conversation_id, count(*) AS n FROM message GROUP BY 1) m WHERE c.id = m.conversation_id`)
	mustExec(t, ctx, pool, `ANALYZE message`)
	terms, err := chat.ParseSearchTerms("nenene")
	if err != nil {
		t.Fatal(err)
	}
	index := store.New(pool, chat.DefaultLimits(), store.WithSearchScanLimit(0))
	plan, err := index.ExplainSearch(ctx, chat.SearchQuery{UserID: 1, Terms: terms, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	fetched := 0
	for _, m := range regexp.MustCompile(`Heap Blocks: exact=(\d+)`).FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		fetched += n
	}
	var own int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT (ctid::text::point)[0]) FROM message WHERE conversation_id = ANY($1)`,
		mine).Scan(&own); err != nil {
		t.Fatal(err)
	}
	if fetched > own {
		t.Errorf("the indexes fetched %d table pages, more than the %d that hold the caller's messages; plan:\n%s", fetched, own, plan)
	}
	want := []string{}
	for seq := int64(50); seq <= 200; seq += 50 {
		want = append(want, ref(chat.Message{ConversationID: mine[0], Seq: seq}))
	}
	slices.Sort(want)
	for i, p := range []*store.Store{st, index, store.New(pool, chat.DefaultLimits(), store.WithSearchScanLimit(-1))} {
		if got := hitBodies(t, p, 1, "nenene"); !slices.Equal(got, want) {
			t.Errorf("plan %d: nenene found %v, want %v", i, got, want)
		}
	}
}
