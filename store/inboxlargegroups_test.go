package store_test

import (
	"regexp"
	"strconv"
	"testing"
)

// An inbox page of large groups reads each group's members once to find
// the other members' lowest watermarks: their delivered watermarks
// (member_delivery) are looked up by key, never matched against every
// other member's. Planned for the two or three members most conversations
// have, the join compared each member of a 500-member group with every
// delivered watermark of the group, 125,000 comparisons a group, half a
// second a page.
func TestAnInboxPageOfLargeGroupsComparesNoMemberWithEveryOther(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	// Most conversations are small; the user's page is 20 groups of 500,
	// whose members have delivered watermarks.
	mustExec(t, ctx, pool, `
		WITH c AS (INSERT INTO conversation (type) SELECT 'GROUP' FROM generate_series(1, 5000) RETURNING id)
		INSERT INTO conversation_member (conversation_id, user_id) SELECT c.id, 10 + u FROM c, generate_series(1, 3) u`)
	inLargeGroups(t, ctx, pool, 1, 20, 500)
	mustExec(t, ctx, pool, `INSERT INTO member_delivery (conversation_id, user_id, delivered_seq)
		SELECT conversation_id, user_id, 1 FROM conversation_member WHERE user_id % 2 = 0`)
	mustExec(t, ctx, pool, `ANALYZE`)
	plan, err := st.ExplainInbox(ctx, 1, 20)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, m := range regexp.MustCompile(`Rows Removed by Join Filter: (\d+)`).FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		compared += n
	}
	if compared > 20*500 {
		t.Errorf("an inbox page of 20 groups of 500 compared and dropped %d member rows a group; want each member matched once; plan:\n%s", compared, plan)
	}
}
