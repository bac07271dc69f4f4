package store_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// A message may be as long as max_body_bytes allows (up to 32 MiB), but a
// tsvector holds at most 1 MB: the search document of a long message of
// many distinct words, or of CJK text (two tokens a character: 171 kB of
// Extension B characters), exceeded it, and PostgreSQL refused the whole
// send ("string is too long for tsvector"). Such a message is sent, found
// by its first words, and by a substring anywhere.
func TestAMessageTooLongToIndexWholeIsSentAndFoundByItsWords(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	l := chat.DefaultLimits()
	l.MaxBodyBytes = 4 << 20
	st, pool := newStoreWithLimits(t, l)
	svc := chat.NewService(st, l)
	g := mustGroup(t, st, 1, 2)

	var latin strings.Builder
	latin.WriteString("zebra ")
	for i := 0; latin.Len() < 1500000; i++ {
		fmt.Fprintf(&latin, "w%x ", i*7919)
	}
	latin.WriteString("quokka")
	var han strings.Builder
	han.WriteString("北京 ")
	for r := rune(0x20000); r <= 0x2a6df; r++ { // CJK Extension B, four bytes each
		han.WriteRune(r)
	}
	sent := map[string]int64{}
	for _, b := range []struct{ name, body string }{{"han", han.String()}, {"latin", latin.String()}} {
		name, body := b.name, b.body
		res, err := svc.Send(ctx, sendReq(g.ID, 1, body))
		if err != nil {
			t.Fatalf("send the %s message of %d bytes: %v", name, len(body), err)
		}
		sent[name] = res.Message.Seq
	}
	for _, p := range searchPlans(pool) {
		for q, name := range map[string]string{"zebra": "latin", "quokka": "latin", "北京": "han", "北": "han", "\U00020000\U00020001": "han"} {
			page := search(t, p, chat.SearchQuery{UserID: 2, Text: q})
			if len(page.Results) != 1 || page.Results[0].Seq != sent[name] {
				t.Errorf("%q: %+v, want the %s message (seq %d)", q, page.Results, name, sent[name])
			}
		}
	}
}

// The search document of a run of CJK characters (its bigrams and
// characters, chat_search_document) costs time linear in the run: 0033
// took each bigram with substr from the run's start, n²/2 steps, 141 ms of
// a send's transaction for a 16 KiB message of Chinese written without
// punctuation, and 6 s for 42,000 characters. Measured on its own
// statement, with a bound a linear document (about 0.1 s here) keeps on a
// loaded machine.
func TestTheSearchDocumentOfALongCJKRunTakesLinearTime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t)
	var b strings.Builder
	for i := 0; i < 42000; i++ {
		b.WriteRune(rune(0x4e00 + (i*7)%20992))
	}
	start := time.Now()
	var n int
	if err := pool.QueryRow(ctx, `SELECT length(chat_search_document($1))`, b.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the document of a run of 42,000 CJK characters took %v", took)
	}
	// " " for the run, then its 42,000 bigrams (the last one character)
	// and its 42,000 characters, each list spaced and after a space.
	if want := 2 + (3*42000 - 2) + 1 + (2*42000 - 1); n != want {
		t.Errorf("the document has %d characters, want %d", n, want)
	}
}

// Migration 0042 rewrote chat_search_document without a rewrite of the
// stored search column: for every text a message could hold, it must give
// the document 0033's gave.
func TestTheLinearSearchDocumentIsTheOneStored(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := freshPool(t)
	m := migrateBefore(t, ctx, pool, 42)
	texts := []string{
		"", "plain words only", "北京", "北", "我们在北京市开会", "用PostgreSQL写的 北京 ok 東京タワー 人々 〆切",
		"한국어 텍스트 ㄱㄴ ｶﾀｶﾅ", "𠀀𠀁𠀂 and 𪜀", "a北b京c", "北京。上海，广州！深圳", "々", "北 京 市",
		strings.Repeat("北京上海", 300) + " tail",
	}
	// And texts drawn from CJK characters of every range the document
	// knows, CJK punctuation and half-width forms, and other letters.
	alphabet := []rune("北京人々〆あアｶﾞ한ㄱᄀ𠀀𪜀豈、。「」　ｰ･abc é1 \u3000")
	rnd := rand.New(rand.NewPCG(42, 51))
	for range 300 {
		r := make([]rune, 1+rnd.IntN(40))
		for i := range r {
			r[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		texts = append(texts, string(r))
	}
	old := make([]string, len(texts))
	for i, s := range texts {
		if err := pool.QueryRow(ctx, `SELECT chat_search_document($1)`, s).Scan(&old[i]); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, ctx, pool, m.SQL)
	for i, s := range texts {
		var now string
		if err := pool.QueryRow(ctx, `SELECT chat_search_document($1)`, s).Scan(&now); err != nil {
			t.Fatal(err)
		}
		if now != old[i] {
			t.Errorf("%q: document %q, 0033 stored %q", s, now, old[i])
		}
	}
}
