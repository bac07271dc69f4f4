package store_test

import (
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// A cursor says whether its listing goes by recency alone (every term too
// common to rank by), and the pages after it stay so. Such a listing walks
// each conversation's messages newest first until it has a page, which is
// quick for common words; a cursor made up to say so for a rare word (or
// one whose words stopped being common) made that walk read every message
// the caller can see, tens of thousands a request, past the bound the
// ranked search keeps (SearchScanLimit). Its pages are now read as the
// ranked search reads its candidates, still listed by recency.
func TestARecencyCursorForARareWordReadsItsCandidatesNotEveryMessage(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	conv := mustGroup(t, st, 1, 2)
	mustExec(t, ctx, pool, `INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)
		SELECT $1, i, 2, gen_random_uuid(), CASE WHEN i IN (100, 30000) THEN 'a zqxjw ' ELSE 'plain words ' END || i,
		       now() - make_interval(secs => 60000 - i), i
		FROM generate_series(1, 60000) i`, conv.ID)
	mustExec(t, ctx, pool, `UPDATE conversation c SET last_seq = 60000, message_count = 60000 WHERE c.id = $1`, conv.ID)
	mustExec(t, ctx, pool, `ANALYZE message`)
	terms, err := chat.ParseSearchTerms("zqxjw")
	if err != nil {
		t.Fatal(err)
	}
	made := chat.EncodeSearchCursor(chat.SearchCursor{AtMicros: time.Now().Add(time.Hour).UnixMicro(),
		ConversationID: math.MaxInt64, Seq: math.MaxInt64, Recent: true})
	plan, err := st.ExplainSearch(ctx, chat.SearchQuery{UserID: 1, Terms: terms, Limit: 20, Cursor: made})
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, m := range regexp.MustCompile(`Rows Removed by Filter: (\d+)`).FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		read += n
	}
	if read > 1000 {
		t.Errorf("the page after a recency cursor read %d messages that do not match; plan:\n%s", read, plan)
	}
	page, err := st.Search(ctx, chat.SearchQuery{UserID: 1, Text: "zqxjw", Terms: terms, Limit: 20, Cursor: made})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Results) != 2 || page.Results[0].Seq != 30000 || page.Results[1].Seq != 100 || page.Results[0].Score != 0 {
		t.Errorf("the page after the cursor: %+v, want seqs 30000 and 100 by recency, score 0", page.Results)
	}
}
