package store_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"golang.org/x/text/unicode/norm"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A word is found however its characters are encoded: composed or
// decomposed accents (macOS and iOS keyboards, copy and paste), Hangul as
// syllables or conjoining jamo, full-width Latin, ligatures; and whatever
// the case of its letters, in any script, not only ASCII's. The query is
// written one way, the message the other, both ways round, on both plans;
// the highlight covers the word as the message writes it.
func TestSearchFindsAWordHoweverItsCharactersAreComposedOrCased(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	eachQueryFindsAndHighlights(t, st, g.ID, plans, []highlightCase{
		{"meet at the cafe\u0301 tomorrow", "café", []string{"cafe\u0301"}},  // decomposed message, composed query
		{"the résumé is attached", "re\u0301sume\u0301", []string{"résumé"}}, // composed message, decomposed query
		{norm.NFD.String("한국 음식"), "한국", []string{norm.NFD.String("한국")}},    // Hangul as conjoining jamo
		{"서울 가요", norm.NFD.String("서울"), []string{"서울"}},                     // a jamo query
		{"ｃｏｆｆｅｅ break", "coffee", []string{"ｃｏｆｆｅｅ"}},                       // full-width message
		{"tea time", "ｔｅａ", []string{"tea"}},                                 // full-width query
		{"the ﬁnal draft", "final", []string{"ﬁnal"}},                        // a ligature
		{"Привет всем", "привет", []string{"Привет"}},                        // a Cyrillic capital
		{"до встречи", "ВСТРЕЧИ", []string{"встречи"}},                       // a query in capitals
		{"ÉCOLE fermée", "école", []string{"ÉCOLE"}},                         // Latin capitals beyond ASCII
		{"ΟΔΟΣ ερμου", "οδος", []string{"ΟΔΟΣ"}},                             // final sigma
		{"Ок, договорились", "ок", []string{"Ок"}},                           // a short word's start
	})
}

// The database folds a message as chat.FoldForSearch folds a query
// (chat_search_fold, or the body as it is where only its ASCII case
// differs, which ILIKE and to_tsvector fold): every character alone, and
// random runs of letters, marks and compatibility characters in the
// scripts whose composition and case differ between implementations.
// Only the Cyrillic modifier letters of Unicode 15.0 (U+1E030–U+1E08F,
// superscripts of phonetic transcription) are left out: PostgreSQL 15's
// normalize() knows Unicode 14, so it leaves them as they are where Go
// folds them to Cyrillic letters; a message holding one is not found by
// its plain letter. So are runs of more than 30 combining marks that
// are not all dropped (marks on a Cyrillic letter, say, or marks outside
// U+0300–U+036F): Go's normalization follows the Stream-Safe Text
// Format, which puts U+034F into such a run and orders the marks on
// either side of it apart, PostgreSQL's does not; only a query holding
// such a run could tell.
func TestTheDatabaseFoldsTextAsTheQueryIsFolded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t)
	var texts []string
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.S, unicode.P, unicode.Zs) ||
			0x1e030 <= r && r <= 0x1e08f {
			continue
		}
		texts = append(texts, string(r))
		// Accents are folded by the letter they stand on: every letter
		// with two marks of the folded block (in the order NFD sorts
		// them into) and one outside it.
		if unicode.IsLetter(r) {
			texts = append(texts, string(r)+"\u0301\u0323", string(r)+"\u0306\u1dc4")
		}
	}
	pick := [][2]rune{{'A', 'Z'}, {0xc0, 0x24f}, {0x300, 0x36f}, {0x370, 0x3ff}, {0x400, 0x4ff}, {0x1100, 0x11ff},
		{0xac00, 0xac40}, {0x1e00, 0x1fff}, {0x2160, 0x2188}, {0x3131, 0x318e}, {0xfb00, 0xfb06}, {0xff01, 0xffdc}, {' ', ' '},
		{0x300, 0x36f}, {0x3099, 0x309a}, {0x3040, 0x30ff}, {0x900, 0x97f}, {0x1dc0, 0x1dff}, {0xdf, 0xdf}, {0x2c60, 0x2c7f}}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range 1 + rnd.IntN(8) {
			p := pick[rnd.IntN(len(pick))]
			b.WriteRune(p[0] + rune(rnd.IntN(int(p[1]-p[0]+1))))
		}
		texts = append(texts, b.String())
	}
	texts = append(texts, "ΟΔΟΣ ΟΔΟΣ. Σ ς σ", "İstanbul I\u0307", "ﬀﬁﬂﬃ ẞ ß ǅ ǈ ǋ", "ｶﾞｷﾞ ｱｲｳ", "\u1112\u1161\u11ab",
		"Tiếng Việt", "ǿ ǽ Ǣ", "Ё Й Ї ё\u0300", "が か\u3099 ぱ",
		// Capitals and title case in words, what NFKC makes of
		// compatibility forms before the accents go, and marks on
		// letters that decompose into none.
		"STRAẞE ẞ\u0301", "ØRESUND ÆBLE ŒUVRE ŁÓDŹ ĐÀ NẴNG ÞÓR ÐÓ", "İSTANBUL İ\u0301 ı\u0307 ı\u0301 I\u0323\u0307",
		"ǅemal ǈubljana ǋegoš Ǳ ǲ", "ＣＡＦＥ\u0301 Ｃａｆé Ｉ\u0307", "ﬁ\u0301 ﬀ\u0301 ﬅ ﬆ ŉ ŉ\u0301 ſ\u0307 ẛ",
		"ø\u20d7 ß\u0301\u1dc4 æ\u0304\u0301", "ᾼ\u0301 ΐ Ϋ\u0301 ϒ\u0301 ϔ",
		// Marks on letters of other scripts stay, around folded ones.
		"й\u0301 ж\u0308 я\u0301é ї\u0301 か\u3099\u0301 क\u093c\u0301 א\u05b8\u0301",
		// A Latin letter's marks go however many there are.
		"a"+strings.Repeat("\u0301\u0323", 40)+"b", "É"+strings.Repeat("\u0300", 31)+"\u1dc4")
	for start := 0; start < len(texts); start += 50000 {
		batch := texts[start:min(start+50000, len(texts))]
		rows, err := pool.Query(ctx, `SELECT COALESCE(chat_search_fold(t), lower(t COLLATE "C")) FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i`, batch)
		if err != nil {
			t.Fatal(err)
		}
		folded, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, s := range batch {
			if want := chat.FoldForSearch(s); folded[i] != want {
				if bad++; bad <= 20 {
					t.Errorf("%q (%U): the database folds it to %q (%U), the query to %q (%U)", s, []rune(s), folded[i], []rune(folded[i]), want, []rune(want))
				}
			}
		}
		if bad > 20 {
			t.Errorf("and %d more", bad-20)
		}
	}
}

// Messages sent before the fold (migration 0025) are found by it once the
// database is upgraded, both plans; a message recalled before the upgrade
// stays unfound, and its erased body stores no folded text. The upgrade
// leaves the new columns with statistics.
func TestMessagesSentBeforeTheSearchFoldAreFoundAfterTheUpgrade(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := freshPool(t)
	st := storeBefore(t, ctx, pool, 25)
	g := mustGroup(t, st, 1, 2)
	cafe := mustSend(t, st, g.ID, 2, "meet at the cafe\u0301")
	hi := mustSend(t, st, g.ID, 2, "Привет всем")
	ascii := mustSend(t, st, g.ID, 2, "Plain ASCII words")
	gone := mustSend(t, st, g.ID, 2, "ÉCOLE secrète")
	mustChange(t, st, change(chat.KindRecall, g.ID, 2, gone.Seq))
	upgradeAndSearch(t, ctx, pool, 25, map[string][]string{"café": {ref(cafe)}, "привет": {ref(hi)}, "ascii": {ref(ascii)},
		"école": nil, "secrète": nil})
	// The plan of a search has the new column's statistics at once.
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_stats WHERE tablename = 'message' AND attname = 'search'`); n != 1 {
		t.Errorf("the search column has %d rows of statistics after the upgrade, want 1", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND search_body IS NOT NULL`, g.ID); n != 2 {
		t.Errorf("%d messages store a folded text, want 2 (the café and Привет ones; not the ASCII one nor the recalled one)", n)
	}
}

// A short word (one or two letters, matched at a word's start) is found
// right after punctuation or a symbol outside ASCII, as after ASCII's:
// Spanish ¿ and ¡, typographic quotes and dashes, guillemets, an emoji.
func TestSearchFindsAShortWordAfterPunctuationOrASymbol(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	cases := []struct{ body, query string }{
		{"¿Sí? vamos", "sí"},
		{"“Hi” there", "hi"},
		{"«Ок», сказал он", "ок"},
		{"wait—no", "no"},
		{"great👍ok", "ok"},
		{"x→y", "y"},
		{"„Ja“, sagte er", "ja"},
	}
	pairs := make([][2]string, len(cases))
	for i, c := range cases {
		pairs[i] = [2]string{c.body, c.query}
	}
	eachQueryFindsItsMessage(t, st, g.ID, plans, pairs)
}

// The search document splits words where a query does (chat_search_words
// and chat.ParseSearchTerms): between two letters, every character that
// is not a letter, digit or mark ends a word, ASCII punctuation included,
// every other keeps it whole (CJK, which the document cuts into
// characters, aside).
func TestTheSearchDocumentSplitsWordsWhereTheQueryDoes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t)
	var (
		texts []string
		split []bool
	)
	for r := rune(1); r <= unicode.MaxRune; r++ {
		s := string(r)
		if !utf8.ValidRune(r) || chat.IsCJK(r) || chat.FoldForSearch(s) != s || 0x1e030 <= r && r <= 0x1e08f ||
			!unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf) {
			continue
		}
		terms, err := chat.ParseSearchTerms("a" + s + "b")
		if err != nil {
			t.Fatal(err)
		}
		texts, split = append(texts, "a"+s+"b"), append(split, len(terms) == 2)
	}
	rows, err := pool.Query(ctx, `SELECT tsvector_to_array(to_tsvector('simple', chat_search_document(chat_search_words(COALESCE(chat_search_fold(t), t)))))
		FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i`, texts)
	if err != nil {
		t.Fatal(err)
	}
	lexemes, err := pgx.CollectRows(rows, pgx.RowTo[[]string])
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, s := range texts {
		if got := slices.Equal(lexemes[i], []string{"a", "b"}); got != split[i] && (split[i] || len(lexemes[i]) != 1) {
			if bad++; bad <= 20 {
				t.Errorf("%q (%U): the document's words are %q, the query's split %v", s, []rune(s), lexemes[i], split[i])
			}
		}
	}
	if bad > 20 {
		t.Errorf("and %d more", bad-20)
	}
}

// eachQueryFindsItsMessage sends each pair's body (from user 2, into conv)
// and wants its query to find that message alone, for user 1, on every
// plan.
func eachQueryFindsItsMessage(t *testing.T, st *store.Store, conv int64, plans []*store.Store, pairs [][2]string) {
	t.Helper()
	want := map[string]string{}
	for _, p := range pairs {
		want[p[1]] = ref(mustSend(t, st, conv, 2, p[0]))
	}
	for i, plan := range plans {
		for _, p := range pairs {
			if got := hitBodies(t, plan, 1, p[1]); !slices.Equal(got, []string{want[p[1]]}) {
				t.Errorf("plan %d: %q found %v, want %s (%q)", i, p[1], got, want[p[1]], p[0])
			}
		}
	}
}

// highlightCase is a message's body, a query that must find it, and the
// words (as the body writes them) that the hit must highlight.
type highlightCase struct {
	body, query string
	words       []string
}

// eachQueryFindsAndHighlights is eachQueryFindsItsMessage for cases; the
// hit of each query must then show the body as sent, the case's words
// highlighted.
func eachQueryFindsAndHighlights(t *testing.T, st *store.Store, conv int64, plans []*store.Store, cases []highlightCase) {
	t.Helper()
	pairs := make([][2]string, len(cases))
	for i, c := range cases {
		pairs[i] = [2]string{c.body, c.query}
	}
	eachQueryFindsItsMessage(t, st, conv, plans, pairs)
	for _, c := range cases {
		page := search(t, st, chat.SearchQuery{UserID: 1, Text: c.query})
		if len(page.Results) != 1 {
			continue // reported above
		}
		h := page.Results[0]
		rs := []rune(h.Snippet)
		var got []string
		for _, hl := range h.Highlights {
			got = append(got, string(rs[hl[0]:hl[1]]))
		}
		if h.Snippet != c.body || !slices.Equal(got, c.words) {
			t.Errorf("%q: snippet %q highlights %q, want %q highlighted in the body as sent", c.query, h.Snippet, got, c.words)
		}
	}
}

// A send calls no LANGUAGE sql function that PostgreSQL does not inline
// (the message table's generated search columns call several): such a
// function's body is parsed and planned again at every statement that
// inserts messages and runs in an executor of its own per row
// (chat_search_words did, some 70 µs of a lone send's 450 in the
// backend: docs/benchmarks.md). An inlined one is never called, so the
// function statistics count none.
func TestASendCallsNoSQLFunctionThatIsNotInlined(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	bodies := []string{"plain ascii, v1.2.3", "Tiếng Việt, Straße", "人々 と 時々"}
	for _, body := range bodies {
		if _, err := tx.Exec(ctx, store.SendMessagesSQL, []int64{g.ID}, []int64{1}, []string{uuid.NewString()}, []string{body}); err != nil {
			t.Fatal(err)
		}
	}
	var called []string
	if err := tx.QueryRow(ctx, `SELECT COALESCE(array_agg(p.proname || ' ' || pg_stat_get_xact_function_calls(p.oid) ORDER BY p.proname), '{}')
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE l.lanname = 'sql' AND p.proname LIKE 'chat\_%' AND pg_stat_get_xact_function_calls(p.oid) > 0`).Scan(&called); err != nil {
		t.Fatal(err)
	}
	if len(called) > 0 {
		t.Errorf("%d sends called these SQL functions (name, calls) instead of inlining them: %q", len(bodies), called)
	}
	var searchCalls int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(pg_stat_get_xact_function_calls('chat_search_document'::regproc), 0)`).Scan(&searchCalls); err != nil {
		t.Fatal(err)
	}
	if searchCalls == 0 {
		t.Error("chat_search_document was never counted: track_functions did not count this transaction's calls")
	}
}
