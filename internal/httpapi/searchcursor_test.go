package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestASearchCursorOfAnotherSearchIsRefusedAsMalformed: a search page's
// nextCursor pages its own search only; given with another q, other
// filters or another conversation scope (whose listing it has no position
// in: it would skip or repeat hits there) it is 400 invalid, as a
// malformed cursor is, over HTTP and RPC. The same search goes on paging
// with it, over either, with another limit or q written otherwise but
// folded the same (or its words in another order: the test below); so
// does a cursor of the form made before a cursor named
// its search, on any search.
func TestASearchCursorOfAnotherSearchIsRefusedAsMalformed(t *testing.T) {
	e := newEnv(t)
	a := e.group(1, 2)
	b := e.group(1, 2)
	for _, body := range []string{"hello one", "hello two", "hello three", "bye hello"} {
		e.sendMsg(2, a, newID(), body)
	}
	e.sendMsg(2, b, newID(), "hello elsewhere")
	e.sendMsg(1, b, newID(), "bye bye")

	var first chat.SearchPage
	e.must(http.StatusOK, 1, "GET", pathf("/v1/search?q=hello&conversationId=%d&limit=1", a), nil, &first)
	if len(first.Results) != 1 || first.NextCursor == "" {
		t.Fatalf("first page: %+v, want 1 hit and a cursor", first)
	}
	cursor := url.QueryEscape(first.NextCursor)
	malformed := e.do(1, "GET", "/v1/search?q=hello&cursor=bogus", nil)
	if malformed.status != http.StatusBadRequest || malformed.errorCode() != "invalid" {
		t.Fatalf("malformed cursor: %d %s, want 400 invalid", malformed.status, truncate(malformed.body))
	}
	for _, query := range []string{
		pathf("q=bye&conversationId=%d", a),       // another text
		pathf("q=hello+bye&conversationId=%d", a), // another term added
		pathf("q=hello&conversationId=%d", b),     // another conversation
		"q=hello",                                 // every conversation
		pathf("q=hello&conversationId=%d&senderId=2", a),
		pathf("q=hello&conversationId=%d&after=2000-01-01T00:00:00Z", a),
		pathf("q=hello&conversationId=%d&before=2100-01-01T00:00:00Z", a),
	} {
		r := e.do(1, "GET", "/v1/search?"+query+"&cursor="+cursor, nil)
		if r.status != malformed.status || r.errorCode() != malformed.errorCode() {
			t.Errorf("the cursor of q=hello in %d on %s: %d %s, want %d %s as a malformed cursor",
				a, query, r.status, truncate(r.body), malformed.status, malformed.errorCode())
		}
	}
	if rr := e.rpc(1, "search", pathf(`{"q":"bye","conversationId":%d,"cursor":%q}`, a, first.NextCursor)); rr.status != http.StatusBadRequest || rr.code != "invalid" {
		t.Errorf("over RPC with another q: %s, want 400 invalid", rr.raw)
	}
	if rr := e.rpc(1, "search", pathf(`{"q":"hello","conversationId":%d,"cursor":%q}`, b, first.NextCursor)); rr.status != http.StatusBadRequest || rr.code != "invalid" {
		t.Errorf("over RPC on another conversation: %s, want 400 invalid", rr.raw)
	}

	// The same search pages on: the three hits after the first, none again.
	seen := map[int64]bool{first.Results[0].Seq: true}
	rest := func(q, cursor string) []int64 {
		t.Helper()
		var p chat.SearchPage
		e.must(http.StatusOK, 1, "GET", pathf("/v1/search?q=%s&conversationId=%d&limit=10&cursor=%s", q, a, url.QueryEscape(cursor)), nil, &p)
		var seqs []int64
		for _, h := range p.Results {
			if seen[h.Seq] || h.ConversationID != a {
				t.Errorf("q=%s after the first page: hit %+v again or of another conversation", q, h)
			}
			seqs = append(seqs, h.Seq)
		}
		return seqs
	}
	if got := rest("hello", first.NextCursor); len(got) != 3 {
		t.Errorf("the rest of q=hello: seqs %v, want 3", got)
	}
	if got := rest("HELLO", first.NextCursor); len(got) != 3 {
		t.Errorf("the rest of q=HELLO (the same search folded): seqs %v, want 3", got)
	}
	rr := e.rpc(1, "search", pathf(`{"q":"hello","conversationId":%d,"limit":10,"cursor":%q}`, a, first.NextCursor))
	var rp chat.SearchPage
	decodeInto(t, rr.raw, &rp)
	if rr.status != http.StatusOK || len(rp.Results) != 3 {
		t.Errorf("the rest over RPC: %s, want 3 hits", rr.raw)
	}

	// A cursor without the search's key, as a client may still hold one
	// from before: taken, on its own search as on another.
	raw, err := base64.RawURLEncoding.DecodeString(first.NextCursor)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(string(raw), ":")
	if last := fields[len(fields)-1]; !strings.HasPrefix(last, "k") {
		t.Fatalf("cursor %q has no search key", raw)
	}
	old := base64.RawURLEncoding.EncodeToString([]byte(strings.Join(fields[:len(fields)-1], ":")))
	if got := rest("hello", old); len(got) != 3 {
		t.Errorf("the rest of q=hello by an older cursor: seqs %v, want 3", got)
	}
	if r := e.do(1, "GET", "/v1/search?q=bye&cursor="+old, nil); r.status != http.StatusOK {
		t.Errorf("an older cursor on another search: %d %s, want 200 as before", r.status, truncate(r.body))
	}
}

// TestASearchCursorPagesTheSameWordsInAnyOrder: "hello world", "world
// hello" and "world hello world" are one search (a message matches when
// every word does, and the rank does not depend on their order or
// repeats): each lists the same hits with the same scores, so each pages
// on with the others' cursors, where the cursor's key of the words in
// their order refused them as another search's.
func TestASearchCursorPagesTheSameWordsInAnyOrder(t *testing.T) {
	e := newEnv(t)
	a := e.group(1, 2)
	for _, body := range []string{"hello world", "world hello hello", "hello world world world",
		"world, hello there", "hello alone", "a world of hellos", "worldwide hello"} {
		e.sendMsg(2, a, newID(), body)
	}
	list := func(q, cursor string, limit int) chat.SearchPage {
		t.Helper()
		var p chat.SearchPage
		path := pathf("/v1/search?q=%s&conversationId=%d&limit=%d", url.QueryEscape(q), a, limit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		e.must(http.StatusOK, 1, "GET", path, nil, &p)
		return p
	}
	hits := func(p chat.SearchPage) []string {
		var out []string
		for _, h := range p.Results {
			out = append(out, pathf("%d:%d", h.Seq, h.Score))
		}
		return out
	}
	orders := []string{"hello world", "world hello", "world hello world"}
	all := hits(list(orders[0], "", 10))
	if len(all) != 6 {
		t.Fatalf("q=%s: hits %v, want the 6 messages holding both words", orders[0], all)
	}
	for _, q := range orders[1:] {
		if got := hits(list(q, "", 10)); !slices.Equal(got, all) {
			t.Fatalf("q=%s lists %v, q=%s %v (seq:score): not one search", q, got, orders[0], all)
		}
	}
	for _, from := range orders {
		first := list(from, "", 2)
		if first.NextCursor == "" {
			t.Fatalf("q=%s, limit 2: no cursor", from)
		}
		for _, q := range orders {
			r := e.do(1, "GET", pathf("/v1/search?q=%s&conversationId=%d&limit=10&cursor=%s",
				url.QueryEscape(q), a, url.QueryEscape(first.NextCursor)), nil)
			if r.status != http.StatusOK {
				t.Errorf("q=%s with the cursor of q=%s: %d %s, want the rest of the same search", q, from, r.status, truncate(r.body))
				continue
			}
			var rest chat.SearchPage
			decodeInto(t, r.body, &rest)
			if got := append(hits(first), hits(rest)...); !slices.Equal(got, all) {
				t.Errorf("q=%s's first page and q=%s's rest: %v, want %v", from, q, got, all)
			}
		}
	}
}

// TestASearchCursorPagesTheSameTermsGivenInAnotherOrder: a search lists
// the messages holding every term, ranked by a relevance of the terms as
// a set (ts_rank sorts a query's operands), so "world hello" is the
// search "hello world" is, page for page: a cursor of one goes on paging
// the other, over HTTP and RPC, as a cursor of "HELLO" pages "hello".
// Its key was made of the terms in the order typed, and such a cursor
// was refused as another search's.
func TestASearchCursorPagesTheSameTermsGivenInAnotherOrder(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	for _, body := range []string{"hello world one", "world hello two", "hello there world three", "world only", "hello only"} {
		e.sendMsg(2, g, newID(), body)
	}
	page := func(q, cursor string) chat.SearchPage {
		t.Helper()
		var p chat.SearchPage
		e.must(http.StatusOK, 1, "GET", pathf("/v1/search?q=%s&conversationId=%d&limit=1&cursor=%s", url.QueryEscape(q), g, url.QueryEscape(cursor)), nil, &p)
		return p
	}
	first := page("hello world", "")
	if len(first.Results) != 1 || first.NextCursor == "" {
		t.Fatalf("first page of q=hello world: %+v, want 1 hit and a cursor", first)
	}
	// The same listing read in the one order and in the other, a page
	// at a time from the first page's cursor.
	for _, q := range []string{"hello world", "world hello", "World, HELLO"} {
		var seqs []int64
		cursor := first.NextCursor
		for cursor != "" && len(seqs) < 5 {
			p := page(q, cursor)
			for _, h := range p.Results {
				seqs = append(seqs, h.Seq)
			}
			cursor = p.NextCursor
		}
		if len(seqs) != 2 || seqs[0] == first.Results[0].Seq || seqs[1] == first.Results[0].Seq {
			t.Errorf("q=%q after q=hello world's first page (seq %d): seqs %v, want the other 2 hits", q, first.Results[0].Seq, seqs)
		}
	}
	rr := e.rpc(1, "search", pathf(`{"q":"world hello","conversationId":%d,"cursor":%q}`, g, first.NextCursor))
	var rp chat.SearchPage
	decodeInto(t, rr.raw, &rp)
	if rr.status != http.StatusOK || len(rp.Results) != 2 {
		t.Errorf("q=world hello over RPC with q=hello world's cursor: %s, want 200 and 2 hits", rr.raw)
	}
	// Not every cursor: another set of terms is still another search.
	if r := e.do(1, "GET", pathf("/v1/search?q=hello+there&conversationId=%d&cursor=%s", g, url.QueryEscape(first.NextCursor)), nil); r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
		t.Errorf("q=hello there with q=hello world's cursor: %d %s, want 400 invalid", r.status, truncate(r.body))
	}
}
