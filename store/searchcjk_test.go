package store_test

import (
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// One CJK character is a token of the search document wherever it stands
// in a run, not only as a run's last character: a one-character query is
// one posting list, so a rare character goes through the index like a
// rare word and a common one is scanned, and both find every message that
// holds the character.
func TestOneCJKCharacterIsATokenWhereverItStandsInARun(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	// 罕 opens its run, 今 too; neither is ever a run's last character.
	mustExec(t, ctx, pool, `INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)
		SELECT $1, i, 2, gen_random_uuid(), 'note ' || i || CASE WHEN i % 1000 = 0 THEN ' 罕见的字' ELSE ' 今天开会' END,
		       now(), i FROM generate_series(1, 60000) i`, g.ID)
	// As sends keep them: the plan is chosen by how many messages the
	// caller can see.
	mustExec(t, ctx, pool, `UPDATE conversation SET last_seq = 60000, message_count = 60000 WHERE id = $1`, g.ID)
	mustExec(t, ctx, pool, `ANALYZE message`)
	for _, c := range []struct {
		char string
		held int
	}{{"罕", 60}, {"今", 59940}, {"字", 60}} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM message WHERE conversation_id = $1 AND search @@ to_tsquery('simple', $2)`,
			g.ID, "'"+c.char+"'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != c.held {
			t.Errorf("the token %s is in %d search documents, want the %d messages holding it", c.char, n, c.held)
		}
	}
	for _, c := range []struct {
		q    string
		scan bool
	}{{"罕", false}, {"今", true}} {
		terms, err := chat.ParseSearchTerms(c.q)
		if err != nil {
			t.Fatal(err)
		}
		scan, err := st.SearchByScan(ctx, terms, 3000)
		if err != nil {
			t.Fatal(err)
		}
		if scan != c.scan {
			t.Errorf("%q seen by a caller of 3000 messages: scan %v, want %v", c.q, scan, c.scan)
		}
	}
	plans := []*store.Store{st, store.New(pool, chat.DefaultLimits(), store.WithSearchScanLimit(-1)),
		store.New(pool, chat.DefaultLimits(), store.WithSearchScanLimit(0))}
	for i, p := range plans {
		page := search(t, p, chat.SearchQuery{UserID: 1, Text: "罕", Limit: 50})
		if len(page.Results) != 50 {
			t.Errorf("plan %d: 罕 found %d hits on the first page, want 50", i, len(page.Results))
		}
		for _, h := range page.Results {
			if !strings.Contains(h.Snippet, "罕") {
				t.Errorf("plan %d: hit %d:%d %q does not hold 罕", i, h.ConversationID, h.Seq, h.Snippet)
			}
		}
	}
}

// 々 and 〆 are letters written inside Japanese words ("人々" people,
// "時々" sometimes, "〆切" deadline): a query of such a word finds it.
func TestSearchFindsJapaneseWordsWithTheIterationMark(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	const me = 1
	g := mustGroup(t, st, me, 2)
	people := mustSend(t, st, g.ID, 2, "人々が集まった")
	often := mustSend(t, st, g.ID, 2, "時々行きます")
	due := mustSend(t, st, g.ID, 2, "〆切は明日")
	plansFind(t, plans, me, map[string][]string{"人々": {ref(people)}, "時々": {ref(often)}, "々が": {ref(people)}, "〆切": {ref(due)}})
}
