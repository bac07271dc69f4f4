package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
)

// A word is found without its accents, whatever the script's accents are
// (Latin, Vietnamese, Greek, ё), and ß, æ, ø, ł and their kin are found
// as the letters they are typed as; the highlight marks the word as the
// message writes it, accents and all.
func TestSearchFindsAWordWrittenWithAccentsByTheWordWithout(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	eachQueryFindsAndHighlights(t, st, g.ID, plans, []highlightCase{
		{"Café au lait", "cafe", []string{"Café"}},
		{"a naïve question", "naive", []string{"naïve"}},
		{"Herr Müller kommt", "Muller", []string{"Müller"}},
		{"Straße gesperrt", "strasse", []string{"Straße"}},
		{"Tiếng Việt là ngôn ngữ", "tieng viet", []string{"Tiếng", "Việt"}},
		{"Łódź i Kraków", "lodz", []string{"Łódź"}},
		{"Øresund bridge", "oresund", []string{"Øresund"}},
		{"Él no vino", "el", []string{"Él"}}, // a short term: a word's start
		{"Αθήνα το καλοκαίρι", "αθηνα", []string{"Αθήνα"}},
		{"Ёлка в зале", "елка", []string{"Ёлка"}},
		{"Joyeux Noël", "noel", []string{"Noël"}},
		{"cre\u0300me brûlée", "creme brulee", []string{"cre\u0300me", "brûlée"}}, // a decomposed accent
	})
}

// A query typed with accents (or ß, or capitals) finds the text written
// without them.
func TestSearchFindsAWordWrittenWithoutAccentsByTheWordWith(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	eachQueryFindsItsMessage(t, st, g.ID, plans, [][2]string{
		{"meet at the cafe", "CAFÉ"},
		{"a naive question", "naïve"},
		{"tieng viet la ngon ngu", "Tiếng Việt"},
		{"strasse gesperrt", "Straße"},
		{"Mueller and muller", "Müller"},
		{"елка в зале", "ёлка"},
	})
}

// What folding accents away must not merge stays apart: the Japanese
// voicing mark makes another kana (が is not か), and so do the Cyrillic
// letters that are letters of their own (й is not и) and marks on other
// scripts than Latin and Greek. Hangul, which the fold decomposes into
// its jamo and composes again, is found as it was.
func TestSearchKeepsTheMarksThatMakeAnotherLetter(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	eachQueryFindsItsMessage(t, st, g.ID, plans, [][2]string{
		{"かき を たべた", "かき"},
		{"がき が きた", "がき"},
		{"ハンバーガー", "ガー"},
		{"это мой дом", "мой"},
		{"это мои дома", "мои"},
		{"Україна їде", "їде"},
		{"한국어 공부", "한국어"},
		{"हिन्दी भाषा", "हिन्दी"},
	})
	plansFind(t, plans, 1, map[string][]string{"カー": nil, "иде": nil, "हनद": nil})
}

// Messages sent before accents were folded (migration 0038) are found
// without them once the database is upgraded, on both plans: the stored
// folded body and search document are computed again. A message
// recalled before the upgrade stays unfound.
func TestMessagesSentBeforeAccentFoldingAreFoundWithoutAccentsAfterTheUpgrade(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := freshPool(t)
	st := storeBefore(t, ctx, pool, 38)
	g := mustGroup(t, st, 1, 2)
	cafe := mustSend(t, st, g.ID, 2, "Café au lait")
	vi := mustSend(t, st, g.ID, 2, "Tiếng Việt")
	ss := mustSend(t, st, g.ID, 2, "straße")
	gone := mustSend(t, st, g.ID, 2, "Crème secrète")
	mustChange(t, st, change(chat.KindRecall, g.ID, 2, gone.Seq))
	upgradeAndSearch(t, ctx, pool, 38, map[string][]string{"cafe": {ref(cafe)}, "café": {ref(cafe)}, "tieng viet": {ref(vi)},
		"vi": {ref(vi)}, "strasse": {ref(ss)}, "creme": nil, "secrete": nil})
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_stats WHERE tablename = 'message' AND attname IN ('search', 'search_body')`); n != 2 {
		t.Errorf("%d of the two search columns have statistics after the upgrade, want 2", n)
	}
}
