package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// searchStores are two stores on one database: one that tests the
// caller's messages directly, one that always goes through the indexes.
// Every search test runs its queries on both: the two plans must agree.
func searchStores(t *testing.T) (*store.Store, []*store.Store) {
	t.Helper()
	st, pool := newStore(t)
	return st, searchPlans(pool)
}

// searchPlans are the two stores of searchStores on pool: the scan of the
// caller's messages, then the indexes.
func searchPlans(pool *pgxpool.Pool) []*store.Store {
	scan := store.New(pool, chat.DefaultLimits(), store.WithSearchScanLimit(-1))
	index := store.New(pool, chat.DefaultLimits(), store.WithSearchScanLimit(0))
	return []*store.Store{scan, index}
}

func search(t *testing.T, st *store.Store, q chat.SearchQuery) chat.SearchPage {
	t.Helper()
	svc := chat.NewService(st, chat.DefaultLimits())
	page, err := svc.Search(testCtx(t), q)
	if err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	return page
}

func hitBodies(t *testing.T, st *store.Store, user int64, text string) []string {
	t.Helper()
	var out []string
	for _, h := range search(t, st, chat.SearchQuery{UserID: user, Text: text, Limit: 50}).Results {
		out = append(out, fmt.Sprintf("%d:%d", h.ConversationID, h.Seq))
	}
	slices.Sort(out)
	return out
}

func ref(m chat.Message) string { return fmt.Sprintf("%d:%d", m.ConversationID, m.Seq) }

// plansFind checks that on every plan each query of want, searched by
// user, finds exactly the messages (refs, in any order) it maps to.
func plansFind(t *testing.T, plans []*store.Store, user int64, want map[string][]string) {
	t.Helper()
	for i, p := range plans {
		for q, w := range want {
			w = slices.Sorted(slices.Values(w))
			if got := hitBodies(t, p, user, q); !slices.Equal(got, w) {
				t.Errorf("plan %d: %q found %v, want %v", i, q, got, w)
			}
		}
	}
}

// laterColumns are columns that today's SQL functions write on every
// path storeBefore's tests take (a recall clears prev_body, and reads
// the reactions' appeared_seq with their count; a group's creation reads
// its members' other conversations' member_count for the presence it
// shows) and that a
// later migration adds: storeBefore adds them to a schema from before
// that migration so the tests can write, and upgradeAndSearch drops them
// again before the upgrade adds them.
var laterColumns = []struct {
	migration          int
	table, column, typ string
}{{39, "message", "prev_body", "text"}, {52, "conversation", "member_count", "integer NOT NULL DEFAULT 0"}, {54, "reaction", "appeared_seq", "bigint"}}

// laterTables are tables that today's SQL and store read on every write
// and that a later migration creates: storeBefore creates them (as the
// migration would, without its rows) and upgradeAndSearch drops them.
var laterTables = []struct {
	migration   int
	table, cols string
}{{41, "outbox_wanted", "one boolean PRIMARY KEY DEFAULT true CHECK (one), seen_at timestamptz NOT NULL DEFAULT now()"}}

// storeBefore is a store on pool, a fresh database brought to the schema
// chatd had before migration v, with today's SQL functions (every migrate
// applies them) and laterColumns: what an upgrade to v starts from.
func storeBefore(t *testing.T, ctx context.Context, pool *pgxpool.Pool, v int) *store.Store {
	t.Helper()
	functions, err := store.Functions()
	if err != nil {
		t.Fatal(err)
	}
	migrateBefore(t, ctx, pool, v)
	for _, c := range laterColumns {
		if v <= c.migration {
			mustExec(t, ctx, pool, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", c.table, c.column, c.typ))
		}
	}
	for _, c := range laterTables {
		if v <= c.migration {
			mustExec(t, ctx, pool, fmt.Sprintf("CREATE TABLE %s (%s)", c.table, c.cols))
		}
	}
	mustExec(t, ctx, pool, functions)
	st := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// upgradeAndSearch migrates pool from migration v on and runs each query
// on both search plans: each must find what want says (nil: nothing).
func upgradeAndSearch(t *testing.T, ctx context.Context, pool *pgxpool.Pool, v int, want map[string][]string) {
	t.Helper()
	for _, c := range laterColumns {
		if v <= c.migration {
			mustExec(t, ctx, pool, fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", c.table, c.column))
		}
	}
	for _, c := range laterTables {
		if v <= c.migration {
			mustExec(t, ctx, pool, "DROP TABLE "+c.table)
		}
	}
	done, err := store.Migrate(ctx, pool)
	if err != nil || len(done) == 0 || done[0] != v {
		t.Fatalf("upgrade applied %v: %v", done, err)
	}
	plansFind(t, searchPlans(pool), 1, want)
}

// Search finds only what the caller may read: conversations they are in,
// from their join on in a "joined" group, never recalled messages, and
// edited ones by their current body.
func TestSearchFindsOnlyWhatTheCallerMayReadAsItIsNow(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, plans := searchStores(t)
	const me, other = 1, 2
	mine := mustGroup(t, st, me, other)
	notMine := mustGroup(t, st, other, 3)
	later := mustGroup(t, st, other)
	a := mustSend(t, st, mine.ID, other, "planning meeting at noon")
	mustSend(t, st, notMine.ID, other, "secret meeting elsewhere")
	mustSend(t, st, later.ID, other, "meeting before you joined")
	mustAdd(t, ctx, st, later.ID, other, me, "")
	b := mustSend(t, st, later.ID, other, "meeting after you joined")
	gone := mustSend(t, st, mine.ID, other, "meeting that will be recalled")
	mustChange(t, st, change(chat.KindRecall, mine.ID, other, gone.Seq))
	ed := mustSend(t, st, mine.ID, other, "typo in the meetnig")
	mustChange(t, st, edit(mine.ID, other, ed.Seq, "fixed: the meeting moved"))
	for i, p := range plans {
		want := []string{ref(a), ref(b), ref(ed)}
		slices.Sort(want)
		if got := hitBodies(t, p, me, "meeting"); !slices.Equal(got, want) {
			t.Errorf("plan %d: meeting: %v, want %v", i, got, want)
		}
		if got := hitBodies(t, p, me, "meetnig"); len(got) != 0 {
			t.Errorf("plan %d: the body before the edit is found: %v", i, got)
		}
		if got := hitBodies(t, p, me, "recalled"); len(got) != 0 {
			t.Errorf("plan %d: a recalled message is found: %v", i, got)
		}
		if got := hitBodies(t, p, other, "secret"); len(got) != 1 {
			t.Errorf("plan %d: the member finds %v", i, got)
		}
	}
	// Narrowing to a conversation the caller is not in is refused as
	// history is.
	_, err := chat.NewService(st, chat.DefaultLimits()).Search(ctx, chat.SearchQuery{UserID: me, Text: "meeting", ConversationID: notMine.ID})
	wantCode(t, "search in a conversation of others", err, chat.CodeNotMember)
	page := search(t, st, chat.SearchQuery{UserID: me, Text: "meeting", ConversationID: later.ID})
	if len(page.Results) != 1 || page.Results[0].Seq != b.Seq {
		t.Fatalf("narrowed to the later group: %+v", page)
	}
	// historyVisible all: the earlier message becomes findable.
	openHistory(t, ctx, st, later.ID, other)
	if got := hitBodies(t, st, me, "joined"); len(got) != 2 {
		t.Fatalf("with history all: %v", got)
	}
}

// Chinese, Japanese and Korean: a query of two Han characters finds the
// messages that hold them in a row, wherever they are in a sentence
// without spaces; one character, three or more, kana and hangul too.
func TestSearchFindsChineseJapaneseAndKoreanWithinSentences(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	zh := mustSend(t, st, g.ID, 2, "我们明天在北京开会，记得带电脑")
	zh2 := mustSend(t, st, g.ID, 2, "北京的天气很好")
	ja := mustSend(t, st, g.ID, 2, "明日は東京で会議があります")
	ko := mustSend(t, st, g.ID, 2, "내일 학교에서 만나요")
	mix := mustSend(t, st, g.ID, 2, "我在用PostgreSQL做搜索")
	mustSend(t, st, g.ID, 2, "京都和北海道") // 京 and 北 but not 北京
	cases := map[string][]string{
		"北京":          {ref(zh), ref(zh2)},
		"京开":          {ref(zh)},
		"北京开会":        {ref(zh)},
		"开会 电脑":       {ref(zh)},
		"天气":          {ref(zh2)},
		"会議":          {ref(ja)},
		"東京":          {ref(ja)},
		"あります":        {ref(ja)},
		"학교":          {ref(ko)},
		"만나":          {ref(ko)},
		"postgresql":  {ref(mix)},
		"用PostgreSQL": {ref(mix)},
		"搜索":          {ref(mix)},
		"京北":          nil,
		"海道北":         nil,
	}
	plansFind(t, plans, 1, cases)
	for i, p := range plans {
		if got := hitBodies(t, p, 1, "京"); len(got) != 4 {
			t.Errorf("plan %d: one character 京 found %v, want the 4 messages holding it", i, got)
		}
	}
	h := search(t, st, chat.SearchQuery{UserID: 1, Text: "北京", ConversationID: g.ID, Limit: 1, Before: new(time.Now().Add(time.Hour))})
	if len(h.Results) != 1 {
		t.Fatalf("hits %+v", h)
	}
	hit := h.Results[0]
	rs := []rune(hit.Snippet)
	if len(hit.Highlights) != 1 || string(rs[hit.Highlights[0][0]:hit.Highlights[0][1]]) != "北京" {
		t.Fatalf("highlights %v of %q", hit.Highlights, hit.Snippet)
	}
}

// Substrings of three characters or more match inside words; shorter
// terms match the start of words; whole-word matches rank first, then
// newer messages.
func TestSearchMatchesSubstringsAndRanksWordsFirstThenRecency(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	inner := mustSend(t, st, g.ID, 2, "see the signpost")
	word1 := mustSend(t, st, g.ID, 2, "post it today")
	word2 := mustSend(t, st, g.ID, 2, "the post office")
	mustSend(t, st, g.ID, 2, "nothing here")
	for i, p := range plans {
		var got []int64
		for _, h := range search(t, p, chat.SearchQuery{UserID: 1, Text: "Post"}).Results {
			got = append(got, h.Seq)
		}
		if want := []int64{word2.Seq, word1.Seq, inner.Seq}; !slices.Equal(got, want) {
			t.Errorf("plan %d: post ranked %v, want %v (words, newest first, then the substring)", i, got, want)
		}
		if got := hitBodies(t, p, 1, "ign"); !slices.Equal(got, []string{ref(inner)}) {
			t.Errorf("plan %d: substring ign: %v", i, got)
		}
		if got := hitBodies(t, p, 1, "to"); !slices.Equal(got, []string{ref(word1)}) {
			t.Errorf("plan %d: prefix to: %v", i, got)
		}
		if got := hitBodies(t, p, 1, "post office"); !slices.Equal(got, []string{ref(word2)}) {
			t.Errorf("plan %d: two words: %v", i, got)
		}
	}
	// Filters.
	mine := mustSend(t, st, g.ID, 1, "my post")
	page := search(t, st, chat.SearchQuery{UserID: 1, Text: "post", SenderID: 1})
	if len(page.Results) != 1 || page.Results[0].Seq != mine.Seq {
		t.Fatalf("senderId filter: %+v", page)
	}
	page = search(t, st, chat.SearchQuery{UserID: 1, Text: "post", After: &mine.CreatedAt})
	if len(page.Results) != 0 {
		t.Fatalf("after the newest: %+v", page)
	}
	svc := chat.NewService(st, chat.DefaultLimits())
	for _, bad := range []chat.SearchQuery{{UserID: 1, Text: ""}, {UserID: 1, Text: "!!!"}, {UserID: 1, Text: "x", Cursor: "nope"}} {
		_, err := svc.Search(testCtx(t), bad)
		wantCode(t, fmt.Sprintf("search %+v", bad), err, chat.CodeInvalid)
	}
}

// pageThrough lists every page of q on plan i, in order, calling between
// after each page; a hit on two pages, or paging that does not end, fails.
func pageThrough(t *testing.T, i int, p *store.Store, q chat.SearchQuery, between func(chat.SearchPage)) []string {
	t.Helper()
	var got []string
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		page := search(t, p, q)
		for _, h := range page.Results {
			r := fmt.Sprintf("%d:%d", h.ConversationID, h.Seq)
			if seen[r] {
				t.Fatalf("plan %d: %s on two pages", i, r)
			}
			seen[r] = true
			got = append(got, r)
		}
		between(page)
		if q.Cursor = page.NextCursor; q.Cursor == "" {
			return got
		}
		if pages > 10 {
			t.Fatalf("plan %d: paging does not end", i)
		}
	}
}

// among is the refs of got that want holds, in got's order.
func among(got, want []string) []string {
	var out []string
	for _, r := range got {
		if slices.Contains(want, r) {
			out = append(out, r)
		}
	}
	return out
}

// Paging is stable: messages that arrive between pages never make a page
// repeat or skip a hit of the first listing.
func TestSearchPagingNeitherRepeatsNorSkipsWhileMessagesArrive(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	var want []string
	for i := range 23 {
		body := fmt.Sprintf("report %d", i)
		if i%3 == 0 {
			body = fmt.Sprintf("the report number %d, a longer one", i)
		}
		want = append(want, ref(mustSend(t, st, g.ID, 2, body)))
	}
	slices.Sort(want)
	for i, p := range plans {
		got := pageThrough(t, i, p, chat.SearchQuery{UserID: 1, Text: "report", Limit: 5}, func(chat.SearchPage) {
			mustSend(t, st, g.ID, 2, "another report arrives") // a new hit, ranked first
		})
		old := among(got, want)
		slices.Sort(old)
		if !slices.Equal(old, want) {
			t.Fatalf("plan %d: pages held %d of the %d first hits", i, len(old), len(want))
		}
	}
}

// A word that most messages hold carries no relevance, like a stop word:
// its hits are listed newest first with score 0, also those that hold it
// three times (ranked first otherwise), by either plan; paging reaches
// each hit once while new ones arrive, and a rarer word is still ranked.
func TestSearchListsAWordMostMessagesHoldByRecencyAlone(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	groups := []chat.Conversation{mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 3)}
	var want []string // newest first
	for i := range 40 {
		body := fmt.Sprintf("status %d", i)
		switch {
		case i%8 == 0:
			body = fmt.Sprintf("nothing of note %d", i)
		case i%5 == 0:
			body = fmt.Sprintf("status status status %d and a rare remark", i)
		}
		m := mustSend(t, st, groups[i%2].ID, 2+int64(i%2), body)
		if i%8 != 0 {
			want = append([]string{ref(m)}, want...)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE message`); err != nil {
		t.Fatal(err)
	}
	arrived := 0
	for i, opt := range []store.Option{store.WithSearchScanLimit(-1), store.WithSearchScanLimit(0)} {
		p := store.New(pool, chat.DefaultLimits(), opt) // reads the statistics afresh
		sent := 0
		got := pageThrough(t, i, p, chat.SearchQuery{UserID: 1, Text: "status", Limit: 6}, func(page chat.SearchPage) {
			for _, h := range page.Results {
				if h.Score != 0 {
					t.Fatalf("plan %d: hit %d:%d scored %d, want 0", i, h.ConversationID, h.Seq, h.Score)
				}
			}
			mustSend(t, st, groups[0].ID, 2, "a new status") // newer than every cursor
			sent++
		})
		// The earlier plan's new messages are listed too, newest of all.
		if old := among(got, want); !slices.Equal(old, want) || len(got) != len(want)+arrived {
			t.Fatalf("plan %d: status listed\n%v\nwant newest first\n%v", i, got, want)
		}
		arrived += sent
		page := search(t, p, chat.SearchQuery{UserID: 1, Text: "rare"})
		if len(page.Results) == 0 || page.Results[0].Score == 0 {
			t.Fatalf("plan %d: a rarer word is not ranked: %+v", i, page.Results)
		}
	}
}

// PostgreSQL's parser keeps a number with a point, an e-mail address, a
// version or a file name one token, where a query splits them at the
// punctuation: the document must split them alike, or a short term (a
// word's start) never finds its piece, nor the whole finds itself.
func TestSearchFindsTheWordsOfNumbersAddressesVersionsAndFileNames(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	const me = 1
	g := mustGroup(t, st, me, 2)
	pi := mustSend(t, st, g.ID, 2, "pi is 3.14 today")
	mail := mustSend(t, st, g.ID, 2, "write to bob@ab.io please")
	ver := mustSend(t, st, g.ID, 2, "v1.2.3 is out")
	file := mustSend(t, st, g.ID, 2, "see a_b.txt")
	plansFind(t, plans, me, map[string][]string{"3.14": {ref(pi)}, "14": {ref(pi)}, "bob@ab.io": {ref(mail)},
		"ab.io": {ref(mail)}, "io": {ref(mail)}, "v1.2.3": {ref(ver)}, "2.3": {ref(ver)}, "b.txt": {ref(file)}})
}

// A search whose statistics query fails still answers, by the plan it
// picks without them: the query used to run in the search's own
// transaction, which PostgreSQL then aborted, so the search itself
// failed ("current transaction is aborted").
func TestASearchAnswersWhenItsStatisticsQueryFails(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 2, "the quarterly report")
	for _, opts := range [][]store.Option{nil, {store.WithSearchScanLimit(0)}} {
		s := store.New(pool, chat.DefaultLimits(), opts...)
		s.BreakSearchStatistics()
		if got := hitBodies(t, s, 1, "report"); !slices.Equal(got, []string{ref(m)}) {
			t.Fatalf("hits %v, want [%s]", got, ref(m))
		}
	}
}
