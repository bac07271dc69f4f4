package chat

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// SearchQuery finds messages of the conversations UserID is a member of,
// among the entries UserID may read (from their join on in a group whose
// history is "joined"), never recalled ones, by their current body.
// ConversationID and SenderID narrow it; Before and After bound createdAt
// (exclusive). Results are ranked by relevance, then newest first; Cursor
// continues a previous page.
type SearchQuery struct {
	UserID         int64
	Text           string
	ConversationID int64
	SenderID       int64
	Before, After  *time.Time
	Limit          int
	Cursor         string

	// Terms is Text parsed (ParseSearchTerms); the Service fills it.
	Terms []SearchTerm
}

// SearchFilter is a search's parameters besides its text, as clients
// send them (RPC search, GET /v1/search's query): the SearchQuery fields
// of the same names.
type SearchFilter struct {
	ConversationID int64      `json:"conversationId,omitempty"`
	SenderID       int64      `json:"senderId,omitempty"`
	Before         *time.Time `json:"before,omitempty"`
	After          *time.Time `json:"after,omitempty"`
	Limit          int        `json:"limit,omitempty"`
	Cursor         string     `json:"cursor,omitempty"`
}

// Query is the search for text by userID that f narrows.
func (f SearchFilter) Query(userID int64, text string) SearchQuery {
	return SearchQuery{UserID: userID, Text: text, ConversationID: f.ConversationID, SenderID: f.SenderID,
		Before: f.Before, After: f.After, Limit: f.Limit, Cursor: f.Cursor}
}

// SearchPage is a page of hits; NextCursor is empty on the last one.
type SearchPage struct {
	Results    []SearchHit `json:"results"`
	NextCursor string      `json:"nextCursor"`
}

// SearchHit is one message found: where it is, who wrote it, and a
// snippet of its current body around the first match, with the matched
// parts as [start, end) offsets in Unicode code points of Snippet.
type SearchHit struct {
	ConversationID int64      `json:"conversationId"`
	Seq            int64      `json:"seq"`
	SenderID       int64      `json:"senderId"`
	CreatedAt      time.Time  `json:"createdAt"`
	EditedAt       *time.Time `json:"editedAt,omitempty"`
	Snippet        string     `json:"snippet"`
	Highlights     [][2]int   `json:"highlights"`
	// Score is the relevance the results are ordered by (higher first);
	// 0 for every hit of a query whose terms are all too common to carry
	// relevance (then the order is recency alone).
	Score int64 `json:"score"`
}

// Search limits.
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 50
	MaxSearchRunes     = 200
	MaxSearchTerms     = 8
	SearchSnippetRunes = 120
)

// SearchTerm is one term of a query. A CJK term (Chinese, Japanese or
// Korean characters) matches where the text holds it (bigram tokens, see
// migrations/0019_people.sql); another term of three characters or more
// matches as a case-insensitive substring (trigrams), a shorter one as the
// start of a word. A message matches when every term does.
type SearchTerm struct {
	Text string // folded (FoldForSearch)
	CJK  bool
}

// FoldForSearch is the form search compares text in, the query's and the
// message's alike: Unicode NFKC, every character lower-cased
// (unicode.ToLower, one character for one) and a final sigma made a
// sigma, then accents folded away (foldLetters), so "cafe" finds "Café",
// "tieng viet" finds "Tiếng Việt" and "strasse" finds "Straße", and a
// query typed with its accents finds the text written without them.
// NFKC rather than NFC: besides composing what was typed decomposed
// ("e" and a combining acute, Hangul as conjoining jamo) it folds the
// compatibility forms a reader takes for the same letters (full-width
// Latin, half-width katakana, ligatures such as "ﬁ", superscripts), which
// for finding a message is what matters, not their look. The database
// computes the same fold of every message (chat_search_fold,
// migrations/0038_search_accents.sql); the store tests check that the two
// agree on every character.
func FoldForSearch(s string) string {
	out, _ := foldSpans(s)
	return string(out)
}

// foldRune lower-cases one character of NFKC text as FoldForSearch does,
// and makes "ё" the "е" Russian writes for it: ё is read as е with two
// dots, and most Russian text leaves them out.
func foldRune(r rune) rune {
	switch r = unicode.ToLower(r); r {
	case 'ς':
		return 'σ'
	case 'ё':
		return 'е'
	}
	return r
}

// Accent folding: what a search does not tell apart. A combining mark
// of U+0300–U+036F (acute, grave, circumflex, tilde, diaeresis, ring,
// cedilla, ogonek, caron, the dot below and horn of Vietnamese, the
// Greek tonos and dialytika...) is dropped where it stands on a Latin or
// Greek letter once the text is decomposed (NFD): é, ü, ñ, ç, ő, ế, ά,
// ϊ. Marks on any other script stay, with what they mean there: Cyrillic
// й (и with a breve, a letter of its own in Russian; ё alone is folded,
// foldRune), Ukrainian ї, and marks outside that block, so the Japanese
// voicing marks (が is not か, U+3099 and U+309A) and the vowel signs of
// Indic scripts are kept, and Hangul, which NFD splits into its jamo,
// comes back whole (NFC). Then the Latin letters that decompose into no
// letter and mark but are read, and typed on keyboards without them, as
// such (search engines fold them alike): ß, æ, œ and þ as two letters,
// ø, ł, đ, ð and the dotless ı as one.
var foldLetters = map[rune]string{
	'ß': "ss", 'æ': "ae", 'œ': "oe", 'þ': "th",
	'ø': "o", 'ł': "l", 'đ': "d", 'ð': "d", 'ı': "i",
}

// accentFolder folds the accents of lower-cased NFKC text, one
// normalization segment after another (foldSpans): after carries over
// whether the last character kept was a Latin or Greek letter, whose
// marks a following segment drops too. Segment by segment is the whole
// text's fold (chat_search_fold decomposes and composes it at once): a
// segment starts with a character that combines with nothing before it.
// buf holds a segment's UTF-8 while it is checked.
type accentFolder struct {
	after bool
	buf   []byte
}

// fold appends seg, its accents folded, to out.
func (f *accentFolder) fold(out []rune, seg []rune) []rune {
	if f.unchanged(seg) {
		f.after = isLatinOrGreekLetter(seg[len(seg)-1])
		return append(out, seg...)
	}
	var b []rune
	for _, r := range norm.NFD.String(string(seg)) {
		if r >= 0x300 && r <= 0x36f && f.after {
			continue
		}
		f.after = isLatinOrGreekLetter(r)
		if s, ok := foldLetters[r]; ok {
			b = append(b, []rune(s)...)
			continue
		}
		b = append(b, r)
	}
	return append(out, []rune(norm.NFC.String(string(b)))...)
}

// unchanged reports whether folding accents leaves seg as it is, as
// chat_search_fold_unicode tells it without decomposing: only a
// character of U+00C0–U+03FF or U+1E00–U+1FFF (every Latin or Greek
// letter with a decomposition, every mark dropped, every letter mapped)
// changes, and composing changes nothing in NFC text (NFKC's output is
// NFC; its lower case almost always). Most of a Cyrillic, CJK or Arabic
// text is so, and a snippet folds every hit's body: decomposing and
// composing each of its characters anew would cost several times the
// fold itself.
func (f *accentFolder) unchanged(seg []rune) bool {
	ascii := true
	for _, r := range seg {
		if 0xc0 <= r && r <= 0x3ff || 0x1e00 <= r && r <= 0x1fff {
			return false
		}
		ascii = ascii && r < utf8.RuneSelf
	}
	if ascii {
		return true
	}
	f.buf = f.buf[:0]
	for _, r := range seg {
		f.buf = utf8.AppendRune(f.buf, r)
	}
	return norm.NFC.IsNormal(f.buf)
}

// isLatinOrGreekLetter reports whether r is a letter whose combining
// marks search folds away (accentFolder). chat_search_fold's character
// class is the same set, as Unicode 15.0 has it.
func isLatinOrGreekLetter(r rune) bool {
	return unicode.IsLetter(r) && unicode.In(r, unicode.Latin, unicode.Greek)
}

// Substring reports whether the term matches anywhere in a word (rather
// than at a word's start).
func (t SearchTerm) Substring() bool { return !t.CJK && utf8.RuneCountInString(t.Text) >= 3 }

// IsCJK reports whether r is a Chinese, Japanese or Korean character, as
// the search document tokenises them (chat_search_document, migrations
// 0020 and 0033): 々 and 〆 too, letters inside Japanese words ("人々").
func IsCJK(r rune) bool {
	switch {
	case r >= 0x1100 && r <= 0x11ff, r == 0x3005, r == 0x3006, r >= 0x3040 && r <= 0x30ff, r >= 0x3130 && r <= 0x318f,
		r >= 0x3400 && r <= 0x4dbf, r >= 0x4e00 && r <= 0x9fff, r >= 0xac00 && r <= 0xd7af,
		r >= 0xf900 && r <= 0xfaff, r >= 0xff66 && r <= 0xff9f, r >= 0x20000 && r <= 0x2ffff:
		return true
	}
	return false
}

// ParseSearchTerms splits a query, folded (FoldForSearch), into terms: at
// anything but letters, digits and combining marks (isWordRune), and where
// CJK characters meet others ("用PostgreSQL" is 用 and postgresql).
// Repeated terms count once. The length limit holds before and after the
// fold (a compatibility character can fold to several).
func ParseSearchTerms(text string) ([]SearchTerm, error) {
	if !utf8.ValidString(text) {
		return nil, Errorf(CodeInvalid, "q is not valid UTF-8")
	}
	text = strings.TrimSpace(text)
	if n := utf8.RuneCountInString(text); n == 0 || n > MaxSearchRunes {
		return nil, Errorf(CodeInvalid, "q must be 1 to %d characters", MaxSearchRunes)
	}
	if text = FoldForSearch(text); utf8.RuneCountInString(text) > MaxSearchRunes {
		return nil, Errorf(CodeInvalid, "q must be 1 to %d characters", MaxSearchRunes)
	}
	var terms []SearchTerm
	seen := map[SearchTerm]bool{}
	var cur []rune
	curCJK := false
	flush := func() {
		if len(cur) == 0 {
			return
		}
		t := SearchTerm{Text: string(cur), CJK: curCJK}
		cur = cur[:0]
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	for _, r := range text {
		if !isWordRune(r) {
			flush()
			continue
		}
		c := IsCJK(r)
		if len(cur) > 0 && c != curCJK {
			flush()
		}
		curCJK = c
		cur = append(cur, r)
	}
	flush()
	if len(terms) == 0 {
		return nil, Errorf(CodeInvalid, "q has no letters or digits to search for")
	}
	if len(terms) > MaxSearchTerms {
		return nil, Errorf(CodeInvalid, "q has more than %d words", MaxSearchTerms)
	}
	return terms, nil
}

// Search validates and runs a search.
func (s *Service) Search(ctx context.Context, q SearchQuery) (SearchPage, error) {
	terms, err := ParseSearchTerms(q.Text)
	if err != nil {
		return SearchPage{}, err
	}
	q.Terms = terms
	// 0 is no filter (docs/http.md), so only a negative id is refused.
	if q.ConversationID < 0 {
		return SearchPage{}, Errorf(CodeInvalid, "conversationId must not be negative; 0 or absent means any conversation")
	}
	if q.SenderID < 0 {
		return SearchPage{}, Errorf(CodeInvalid, "senderId must not be negative; 0 or absent means any sender")
	}
	if q.Limit < 0 {
		return SearchPage{}, Errorf(CodeInvalid, "limit must not be negative")
	}
	if q.Before != nil && q.After != nil && !q.After.Before(*q.Before) {
		return SearchPage{}, Errorf(CodeInvalid, "after must be earlier than before")
	}
	if _, err := q.DecodeCursor(); err != nil {
		return SearchPage{}, err
	}
	q.Limit = ClampLimit(q.Limit, DefaultSearchLimit, MaxSearchLimit)
	p, err := s.people()
	if err != nil {
		return SearchPage{}, err
	}
	return p.Search(ctx, q)
}

// SearchCursor is where a page of search results ended: the last hit's
// ordering key, and the search it pages.
type SearchCursor struct {
	Score          int64
	AtMicros       int64
	ConversationID int64
	Seq            int64
	// Recent: the listing is by recency alone (every term too common to
	// carry relevance); its later pages stay so whatever the statistics
	// say by then.
	Recent bool
	// Search is the SearchKey of the query whose page it ends: a
	// position is only one in the listing of that query, and given to
	// another (other terms rank and scope it otherwise) it would skip or
	// repeat hits there. Empty in a cursor made before cursors carried
	// it, which any query takes: a client may hold one across an upgrade.
	Search string
}

// SearchKey is a short digest of what orders and bounds q's listing: its
// terms (folded and parsed: Terms, so "Café" and "cafe" are one search),
// as a set, and its filters as the store compares them (times to the
// microsecond, before rounded up and after cut). Limit and Cursor are not
// in it: a client may change its page size between pages. The terms'
// order is not either: a message matches every term, whichever comes
// first, and the relevance is of the terms as a set (ts_rank sorts a
// query's operands), so "world hello" lists what "hello world" does, in
// the same order.
func (q SearchQuery) SearchKey() string {
	terms := slices.Clone(q.Terms)
	slices.SortFunc(terms, func(a, b SearchTerm) int {
		if c := strings.Compare(a.Text, b.Text); c != 0 {
			return c
		}
		switch {
		case a.CJK == b.CJK:
			return 0
		case a.CJK:
			return 1
		}
		return -1
	})
	h := sha256.New()
	for _, t := range terms {
		h.Write([]byte(strconv.Quote(t.Text)))
		if t.CJK {
			h.Write([]byte("c"))
		}
		h.Write([]byte{0})
	}
	micros := func(t *time.Time, up bool) string {
		if t == nil {
			return "-"
		}
		m := t.Truncate(time.Microsecond)
		if up && !m.Equal(*t) {
			m = m.Add(time.Microsecond)
		}
		return strconv.FormatInt(m.UnixMicro(), 10)
	}
	h.Write([]byte(strconv.FormatInt(q.ConversationID, 10) + ":" + strconv.FormatInt(q.SenderID, 10) + ":" +
		micros(q.Before, true) + ":" + micros(q.After, false)))
	// 48 bits: a guard against a cursor given to the wrong search, not
	// against one forged (a forged position only pages the caller's own
	// results).
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// EncodeSearchCursor makes the opaque cursor of a search page:
// score:at:conversation:seq, then "r" when Recent and "k" and the Search
// key when it has one.
func EncodeSearchCursor(c SearchCursor) string {
	s := strconv.FormatInt(c.Score, 10) + ":" + strconv.FormatInt(c.AtMicros, 10) + ":" +
		strconv.FormatInt(c.ConversationID, 10) + ":" + strconv.FormatInt(c.Seq, 10)
	if c.Recent {
		s += ":r"
	}
	if c.Search != "" {
		s += ":k" + c.Search
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// DecodeSearchCursor parses a cursor made by EncodeSearchCursor, for any
// search: SearchQuery.DecodeCursor takes only q's own.
func DecodeSearchCursor(s string) (SearchCursor, error) {
	bad := Errorf(CodeInvalid, "cursor is not one this server returned")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return SearchCursor{}, bad
	}
	parts := strings.Split(string(raw), ":")
	var c SearchCursor
	if len(parts) > 4 && strings.HasPrefix(parts[len(parts)-1], "k") {
		if c.Search = parts[len(parts)-1][1:]; c.Search == "" {
			return SearchCursor{}, bad
		}
		parts = parts[:len(parts)-1]
	}
	if c.Recent = len(parts) == 5 && parts[4] == "r"; c.Recent {
		parts = parts[:4]
	}
	if len(parts) != 4 {
		return SearchCursor{}, bad
	}
	var v [4]int64
	for i, p := range parts {
		if v[i], err = strconv.ParseInt(p, 10, 64); err != nil {
			return SearchCursor{}, bad
		}
	}
	if v[2] <= 0 || v[3] <= 0 {
		return SearchCursor{}, bad
	}
	c.Score, c.AtMicros, c.ConversationID, c.Seq = v[0], v[1], v[2], v[3]
	return c, nil
}

// DecodeCursor parses q.Cursor (nil when there is none), refusing, as a
// malformed one is, a cursor another search gave: another text, other
// filters or another conversation scope, whose listing it has no
// position in. q.Terms must be parsed.
func (q SearchQuery) DecodeCursor() (*SearchCursor, error) {
	if q.Cursor == "" {
		return nil, nil
	}
	c, err := DecodeSearchCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	if c.Search != "" && c.Search != q.SearchKey() {
		return nil, Errorf(CodeInvalid, "cursor is not one this server returned for this search (q and filters as on the page that gave it)")
	}
	return &c, nil
}

// Snippet cuts body to about SearchSnippetRunes characters around the first
// match of terms (in the folded body, FoldForSearch) and returns the
// [start, end) code point ranges of body, as it is written, of every match
// within it. A cut is marked with "…".
func Snippet(body string, terms []SearchTerm) (string, [][2]int) {
	rs := []rune(body)
	low, from := foldSpans(body)
	var hits [][2]int
	for _, t := range terms {
		tr := []rune(t.Text)
		for i := 0; len(tr) > 0 && i+len(tr) <= len(low); {
			if matchAt(low, tr, i) && (t.Substring() || t.CJK || wordStarts(low, i)) {
				hits = append(hits, [2]int{from[i][0], from[i+len(tr)-1][1]})
				i += len(tr)
				continue
			}
			i++
		}
	}
	hits = mergeRanges(hits)
	start, end := 0, len(rs)
	if len(rs) > SearchSnippetRunes {
		first := 0
		if len(hits) > 0 {
			first = hits[0][0]
		}
		start = max(0, first-SearchSnippetRunes/4)
		end = min(len(rs), start+SearchSnippetRunes)
		start = max(0, end-SearchSnippetRunes)
	}
	var b strings.Builder
	shift := -start
	if start > 0 {
		b.WriteString("…")
		shift++
	}
	b.WriteString(string(rs[start:end]))
	if end < len(rs) {
		b.WriteString("…")
	}
	out := [][2]int{}
	for _, h := range hits {
		if h[1] <= start || h[0] >= end {
			continue
		}
		out = append(out, [2]int{max(h[0], start) + shift, min(h[1], end) + shift})
	}
	return b.String(), out
}

// foldSpans returns s folded (FoldForSearch) and, for each of its
// characters, the [start, end) code point range of s it comes from: the
// NFKC segment (a character and the marks composed with it, or a
// compatibility character) that became it. A segment folds to nothing
// (a mark alone, dropped), one character or more ("ß" to "ss").
func foldSpans(s string) ([]rune, [][2]int) {
	var (
		it   norm.Iter
		out  []rune
		from [][2]int
		at   int // the code point index of it.Pos() in s
		seg  []rune
		acc  accentFolder
	)
	it.InitString(norm.NFKC, s)
	for !it.Done() {
		p := it.Pos()
		seg = seg[:0]
		for _, r := range string(it.Next()) {
			seg = append(seg, foldRune(r))
		}
		n := utf8.RuneCountInString(s[p:it.Pos()])
		k := len(out)
		if len(seg) > 0 {
			out = acc.fold(out, seg)
		}
		for range len(out) - k {
			from = append(from, [2]int{at, at + n})
		}
		at += n
	}
	return out, from
}

// wordStarts reports whether a word of the folded text s starts at i, as
// the search document's words start: after a character that is not
// isWordRune, or where CJK characters and others meet ("用ok" holds the
// word "ok", ParseSearchTerms and chat_search_document alike).
func wordStarts(s []rune, i int) bool {
	return i == 0 || !isWordRune(s[i-1]) || IsCJK(s[i-1]) != IsCJK(s[i])
}

func matchAt(s, t []rune, i int) bool {
	for j, r := range t {
		if s[i+j] != r {
			return false
		}
	}
	return true
}

// isWordRune reports whether r belongs to a word: a letter, a digit or a
// combining mark (an accent, or a vowel sign of Hindi, Bengali or Tamil,
// spacing or not, which is inside the word it writes). The search
// document ends its words at every other character alike, ASCII
// punctuation included (chat_search_words, migrations/0033).
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) }

// mergeRanges sorts ranges and joins overlapping ones.
func mergeRanges(rs [][2]int) [][2]int {
	if len(rs) < 2 {
		return rs
	}
	// Each term's matches come in order, one term's after another's: a
	// sort by insertion would move every match past those of the terms
	// after it, quadratic in a body of many.
	slices.SortFunc(rs, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r[0] <= last[1] {
			last[1] = max(last[1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}
