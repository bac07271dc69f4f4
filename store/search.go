package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// Search reads the message table's search column (a tsvector of the
// folded body, chat.FoldForSearch, its words split where a query's are,
// with CJK bigrams and single CJK characters, migrations/0020, 0025 and
// 0038; of a message too long for a tsvector, its beginning, 0042) and
// its two GIN indexes, one over that column and one of
// trigrams over the folded body (searchBodySQL).
// The query's terms are folded alike, so a word matches however its
// characters are composed or cased, and with or without its accents.
//
// A query's terms (chat.ParseSearchTerms) become, per term:
//   - CJK: the term's bigrams as a phrase ('北京' <-> '京市'), one bigram
//     for two characters, the character itself for one: exactly "the
//     body holds these characters in a row";
//   - three characters or more: a case-insensitive substring (ILIKE
//     '%term%', which the trigram index serves);
//   - one or two characters: the start of a word ('ok':*).
//
// A message matches when every term does. Relevance is ts_rank of the
// terms as words (any of them, prefixes), so a word match outranks a match
// inside a word; ties go to the newer message. A term a fifth of all
// messages hold carries no relevance (a stop word): a query of only such
// terms is listed by recency alone (searchByRecency, searchRecentSQL), and
// so are the pages after such a listing's cursor, from the candidates a
// ranked search reads once its terms are not that common (searchSQL's
// byRecency: never a walk of every message). The score is ts_rank scaled
// to an integer so that the keyset cursor (score, created_at,
// conversation, seq) compares exactly. The score is the current body's:
// an edit between two pages moves its message in the ranking, so it may
// be skipped or shown twice (docs/http.md says so); only the current body
// has a search document to rank by. A listing by recency is ordered by
// created_at, which edits keep.
//
// Where the caller may look: the conversations they are a member of (or
// the one asked), from seq floor+1 on (historyFloor), messages only, never
// recalled ones; the body is the current one, edits included.
//
// Two plans. The direct scan tests every message the caller can see (the
// primary key's range per conversation, then the stored tsvector and the
// body), whatever the words: its cost is what the caller sees, a common
// word costs what a rare one does. The indexes find the candidates over all
// conversations, which PostgreSQL then intersects with the caller's: fast
// for rare words, the only way that scales to users who see millions of
// messages, and slow for a word that a large part of all messages hold
// (or, were PostgreSQL to fetch every candidate before it intersects, for
// a rare word made of common trigrams: searchAsTrigrams). searchByScan picks between them per query (never the scan above
// SearchScanLimit visible messages); the figures behind its constants are
// in docs/benchmarks.md ("Search", cmd/searchbench).
const SearchScanLimit = 50000

// WithSearchScanLimit fixes the plan by the caller's visible messages
// alone: the direct scan up to n of them, the indexes above; 0 always uses
// the indexes, a negative value never. Without it the plan is chosen per
// query (searchByScan).
func WithSearchScanLimit(n int64) Option {
	return func(s *Store) { s.searchScan = &n }
}

// searchScope is the conversations the caller may search, with their
// floors and the time of their newest message (newest: nil when none is
// known), which no message of theirs is newer than.
type searchScope struct {
	ids, floors []int64
	newest      []*time.Time
}

func (s *Store) Search(ctx context.Context, q chat.SearchQuery) (chat.SearchPage, error) {
	page := chat.SearchPage{Results: []chat.SearchHit{}}
	cur, err := q.DecodeCursor()
	if err != nil {
		return page, err
	}
	err = s.runTx(ctx, "search", readOnly(), func(tx pgx.Tx) error {
		sql, args, recent, err := s.searchStatement(ctx, tx, q, cur)
		if err != nil || sql == "" {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				h    chat.SearchHit
				body string
			)
			if err := rows.Scan(&h.ConversationID, &h.Seq, &h.SenderID, &h.CreatedAt, &h.EditedAt, &body, &h.Score); err != nil {
				return fmt.Errorf("search: %w", err)
			}
			if len(page.Results) == q.Limit {
				last := page.Results[q.Limit-1]
				page.NextCursor = chat.EncodeSearchCursor(chat.SearchCursor{Score: last.Score,
					AtMicros: last.CreatedAt.UnixMicro(), ConversationID: last.ConversationID, Seq: last.Seq, Recent: recent,
					Search: q.SearchKey()})
				break
			}
			h.CreatedAt = h.CreatedAt.UTC()
			if h.EditedAt != nil {
				at := h.EditedAt.UTC()
				h.EditedAt = &at
			}
			h.Snippet, h.Highlights = chat.Snippet(body, q.Terms)
			page.Results = append(page.Results, h)
		}
		return rows.Err()
	})
	if err != nil {
		return chat.SearchPage{}, err
	}
	return page, nil
}

// searchStatement configures tx for q's page after cur and returns the
// statement that reads it ("" when the caller may search nowhere) and
// whether it lists by recency alone.
func (s *Store) searchStatement(ctx context.Context, tx pgx.Tx, q chat.SearchQuery, cur *chat.SearchCursor) (string, []any, bool, error) {
	// Parameters decide the plan here (the terms, the scope's size): a
	// cached generic plan would be one for every query.
	if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', 'force_custom_plan', true),
		set_config('statement_timeout', '10s', true)`); err != nil {
		return "", nil, false, fmt.Errorf("configure search: %w", err)
	}
	scope, visible, err := searchScopeOf(ctx, tx, q.UserID, q.ConversationID)
	if err != nil || len(scope.ids) == 0 {
		return "", nil, false, err
	}
	recent := s.searchByRecency(ctx, tx, q.Terms)
	if cur != nil && cur.Recent && !recent {
		// The pages after a listing by recency stay so, but its terms
		// are not common (any more, or the cursor was made up): walking
		// every conversation newest first would read every message the
		// caller can see before a page of rare hits is found. Their
		// candidates are read as a ranked search reads them, listed by
		// recency.
		way := searchWay{scan: s.searchByScan(ctx, tx, q.Terms, visible), byRecency: true}
		if !way.scan {
			way.trigrams = s.searchAsTrigrams(ctx, tx, q.Terms)
		}
		sql, args := searchSQL(q, scope, cur, way)
		return sql, args, true, nil
	}
	if cur != nil {
		recent = cur.Recent
	}
	if recent {
		// The page is cheap only by walking each conversation's primary
		// key newest first and stopping; PostgreSQL would rather fetch a
		// conversation's rows by bitmap and sort them, which reads every
		// one (3× the time measured on cmd/searchbench's corpus).
		if _, err := tx.Exec(ctx, `SELECT set_config('enable_bitmapscan', 'off', true)`); err != nil {
			return "", nil, false, fmt.Errorf("configure search: %w", err)
		}
		if scope, err = recentScope(ctx, tx, q, scope, cur); err != nil {
			return "", nil, false, err
		}
		sql, args := searchRecentSQL(q, scope, cur)
		return sql, args, true, nil
	}
	way := searchWay{scan: s.searchByScan(ctx, tx, q.Terms, visible)}
	if !way.scan {
		way.trigrams = s.searchAsTrigrams(ctx, tx, q.Terms)
	}
	sql, args := searchSQL(q, scope, cur, way)
	return sql, args, false, nil
}

// searchScopeOf returns the conversations userID may search (only conv
// when given: then not_found or not_member like history) with their
// floors, and how many messages they hold.
func searchScopeOf(ctx context.Context, tx pgx.Tx, userID, conv int64) (searchScope, int64, error) {
	var sc searchScope
	if conv > 0 {
		if _, err := historyFloor(ctx, tx, conv, userID); err != nil {
			return sc, 0, err
		}
	}
	rows, err := tx.Query(ctx, `
		SELECT m.conversation_id,
		       `+floorSQL+`,
		       c.message_count, c.last_message_at
		FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
		WHERE m.user_id = $1 AND ($2::bigint = 0 OR m.conversation_id = $2)
		ORDER BY m.conversation_id`, userID, conv)
	if err != nil {
		return sc, 0, fmt.Errorf("read search scope: %w", err)
	}
	defer rows.Close()
	var visible int64
	for rows.Next() {
		var (
			id, floor, n int64
			newest       *time.Time
		)
		if err := rows.Scan(&id, &floor, &n, &newest); err != nil {
			return sc, 0, fmt.Errorf("read search scope: %w", err)
		}
		sc.ids, sc.floors, sc.newest = append(sc.ids, id), append(sc.floors, floor), append(sc.newest, newest)
		visible += n
	}
	return sc, visible, rows.Err()
}

// params starts a query's parameters with the scope ($1 conversations,
// $2 their floors); arg adds one and returns its placeholder.
func (sc searchScope) params() (*[]any, func(any) string) {
	args := &[]any{sc.ids, sc.floors}
	return args, func(v any) string {
		*args = append(*args, v)
		return "$" + strconv.Itoa(len(*args))
	}
}

// searchWay is how a query reads its messages.
type searchWay struct {
	// scan tests every message the caller can see (functions, which no
	// index serves); otherwise the GIN indexes find the candidates.
	scan bool
	// trigrams holds the substring terms the indexes are given as their
	// trigrams (searchAsTrigrams).
	trigrams map[string]bool
	// byRecency lists the hits by recency alone (every score 0), as
	// searchRecentSQL does, from the candidates this way reads.
	byRecency bool
}

// searchSQL builds the ranked query for q. Every value is a parameter;
// only fixed fragments are put together. The scan walks each
// conversation's primary key (the join drives it); the indexes' candidates
// are found first, on their own (MATERIALIZED keeps PostgreSQL from
// planning them through the join), so that PostgreSQL intersects the
// index's bitmap with the caller's conversations' before it reads a row.
func searchSQL(q chat.SearchQuery, sc searchScope, cur *chat.SearchCursor, way searchWay) (string, []any) {
	args, arg := sc.params()
	where := strings.Join(searchFilters(q, way, arg), "\n\t  AND ")
	score := "0::bigint"
	if !way.byRecency {
		_, rank := searchQueries(q.Terms)
		score = `(ts_rank(x.search, to_tsquery('simple', ` + arg(rank) + `)) * 1000000)::bigint`
	}
	var sql string
	if way.scan {
		sql = `SELECT conversation_id, seq, sender_id, created_at, edited_at, body, score FROM (
	SELECT x.conversation_id, x.seq, x.sender_id, x.created_at, x.edited_at, x.body,
	       ` + score + ` AS score
	FROM message x
	JOIN unnest($1::bigint[], $2::bigint[]) AS v(c, f) ON v.c = x.conversation_id
	WHERE x.conversation_id = ANY($1::bigint[]) AND x.seq > v.f
	  AND x.kind = 'message' AND x.recalled_at IS NULL
	  AND ` + where + `
) t`
	} else {
		sql = `WITH hit AS MATERIALIZED (
	SELECT x.conversation_id, x.seq, x.sender_id, x.created_at, x.edited_at, x.body, x.search
	FROM message x
	WHERE x.conversation_id = ANY($1::bigint[])
	  AND x.kind = 'message' AND x.recalled_at IS NULL
	  AND ` + where + `
)
SELECT conversation_id, seq, sender_id, created_at, edited_at, body, score FROM (
	SELECT x.conversation_id, x.seq, x.sender_id, x.created_at, x.edited_at, x.body,
	       ` + score + ` AS score
	FROM hit x
	JOIN unnest($1::bigint[], $2::bigint[]) AS v(c, f) ON v.c = x.conversation_id
	WHERE x.seq > v.f
) t`
	}
	if cur != nil {
		sql += `
WHERE (score, created_at, conversation_id, seq) < (` + arg(cur.Score) + `::bigint, ` +
			arg(time.UnixMicro(cur.AtMicros)) + `::timestamptz, ` + arg(cur.ConversationID) + `::bigint, ` + arg(cur.Seq) + `::bigint)`
	}
	sql += `
ORDER BY score DESC, created_at DESC, conversation_id DESC, seq DESC
LIMIT ` + arg(q.Limit+1)
	return sql, *args
}

// searchRecentSQL builds the query for q listed by recency alone (score
// 0, so its cursor compares like a ranked one): per conversation the
// newest matches by the primary key, at most a page of them, then the
// newest of all those. A conversation's created_at never goes back as its
// seq grows (chat_send_batch), so its newest by seq are its newest by
// the listing's order.
func searchRecentSQL(q chat.SearchQuery, sc searchScope, cur *chat.SearchCursor) (string, []any) {
	args, arg := sc.params()
	where := searchFilters(q, searchWay{scan: true}, arg)
	if cur != nil {
		where = append(where, `(x.created_at, x.conversation_id, x.seq) < (`+arg(time.UnixMicro(cur.AtMicros))+
			`::timestamptz, `+arg(cur.ConversationID)+`::bigint, `+arg(cur.Seq)+`::bigint)`)
	}
	limit := arg(q.Limit + 1)
	sql := `SELECT x.conversation_id, x.seq, x.sender_id, x.created_at, x.edited_at, x.body, 0::bigint AS score
FROM unnest($1::bigint[], $2::bigint[]) AS v(c, f)
CROSS JOIN LATERAL (
	SELECT x.conversation_id, x.seq, x.sender_id, x.created_at, x.edited_at, x.body
	FROM message x
	WHERE x.conversation_id = v.c AND x.seq > v.f
	  AND x.kind = 'message' AND x.recalled_at IS NULL
	  AND ` + strings.Join(where, "\n\t  AND ") + `
	ORDER BY x.seq DESC
	LIMIT ` + limit + `
) x
ORDER BY x.created_at DESC, x.conversation_id DESC, x.seq DESC
LIMIT ` + limit
	return sql, *args
}

// searchFilters returns the conditions a message x must meet for q. The
// scan tests each message directly: ts_match_vq and texticlike are the
// functions behind @@ and ILIKE, and a function call, unlike the
// operator, is never matched to an index. The indexes are given a
// substring term as one ILIKE, or, for way.trigrams, as one ILIKE per
// trigram with the whole term tested by texticlike.
func searchFilters(q chat.SearchQuery, way searchWay, arg func(any) string) []string {
	match, _ := searchQueries(q.Terms)
	var where []string
	if match != "" {
		p := arg(match)
		if way.scan {
			where = append(where, "ts_match_vq(x.search, to_tsquery('simple', "+p+"))")
		} else {
			where = append(where, "x.search @@ to_tsquery('simple', "+p+")")
		}
	}
	for _, t := range q.Terms {
		if !t.Substring() {
			continue
		}
		p := arg("%" + likeEscape(t.Text) + "%")
		switch {
		case way.scan:
			where = append(where, "texticlike("+searchBodySQL+", "+p+")")
		case way.trigrams[t.Text]:
			for _, tri := range trigramsOf(t.Text) {
				where = append(where, searchBodySQL+" ILIKE "+arg("%"+likeEscape(tri)+"%"))
			}
			where = append(where, "texticlike("+searchBodySQL+", "+p+")")
		default:
			where = append(where, searchBodySQL+" ILIKE "+p)
		}
	}
	if q.SenderID > 0 {
		where = append(where, "x.sender_id = "+arg(q.SenderID))
	}
	if q.Before != nil {
		where = append(where, "x.created_at < "+arg(microsAfter(*q.Before)))
	}
	if q.After != nil {
		where = append(where, "x.created_at > "+arg(*q.After))
	}
	return where
}

// microsAfter returns t rounded up to the microsecond, PostgreSQL's
// precision: the driver cuts what is finer, and a message written in t's
// microsecond, before t, would not be before the cut time. (An after
// time is cut, which keeps its messages: those of later microseconds.)
func microsAfter(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); !c.Equal(t) {
		return c.Add(time.Microsecond)
	}
	return t
}

// searchBodySQL is the text of message x that substring terms match: its
// body folded (chat.FoldForSearch) by chat_search_fold, stored in
// search_body where that differs from the body by more than ASCII case,
// which ILIKE folds (migrations/0025_search_fold.sql and
// 0038_search_accents.sql). The trigram index is over this expression.
const searchBodySQL = "COALESCE(x.search_body, x.body)"

// trigramsOf returns the distinct three-letter windows of s, in order.
func trigramsOf(s string) []string {
	var out []string
	for i := 0; i+3 <= len(s); i++ {
		if w := s[i : i+3]; !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// searchQueries returns the tsquery text that must match (CJK terms and
// short ones; "" when every term is a substring) and the one relevance is
// ranked by (every term as a word or phrase, any of them).
func searchQueries(terms []chat.SearchTerm) (match, rank string) {
	var must, either []string
	for _, t := range terms {
		var tq string
		switch rs := []rune(t.Text); {
		case t.CJK && len(rs) == 1:
			tq = lexeme(t.Text)
		case t.CJK:
			parts := make([]string, 0, len(rs)-1)
			for i := 0; i+1 < len(rs); i++ {
				parts = append(parts, lexeme(string(rs[i:i+2])))
			}
			tq = strings.Join(parts, " <-> ")
			if len(parts) > 1 {
				tq = "(" + tq + ")"
			}
		default:
			tq = lexeme(t.Text) + ":*"
		}
		either = append(either, tq)
		if !t.Substring() {
			must = append(must, tq)
		}
	}
	return strings.Join(must, " & "), strings.Join(either, " | ")
}

// lexeme quotes a term for to_tsquery: terms hold letters and digits only
// (chat.ParseSearchTerms), but quoting keeps the syntax out of reach.
func lexeme(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// likeEscape escapes LIKE's wildcards and its escape character.
func likeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// recentScopeFirst is how many conversations, the most recently active,
// recentScope reads first; each further read takes twice as many.
const recentScopeFirst = 64

// recentScope narrows sc to the conversations that can hold q's page
// listed by recency: a page of hits is newer than any message of the
// conversations whose newest message is older than its last hit. It
// reads the hits' times of the most recently active conversations
// first, more of them until a page is found that way, so that a common
// word's page reads a few conversations' newest messages, not a page of
// each of the caller's thousands of conversations.
func recentScope(ctx context.Context, tx pgx.Tx, q chat.SearchQuery, sc searchScope, cur *chat.SearchCursor) (searchScope, error) {
	if len(sc.ids) <= recentScopeFirst {
		return sc, nil
	}
	order := make([]int, len(sc.ids))
	for i := range order {
		order[i] = i
	}
	// Newest first; a conversation of no known newest message first of all.
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := sc.newest[a], sc.newest[b]
		switch {
		case x == nil && y == nil:
			return 0
		case x == nil:
			return -1
		case y == nil:
			return 1
		}
		return y.Compare(*x)
	})
	var (
		out   searchScope
		times []time.Time // the newest hits' times so far, at most a page and one
	)
	for next, n := 0, recentScopeFirst; next < len(order); n *= 2 {
		batch := searchScope{}
		for _, i := range order[next:min(next+n, len(order))] {
			batch.ids, batch.floors = append(batch.ids, sc.ids[i]), append(batch.floors, sc.floors[i])
		}
		next += len(batch.ids)
		sql, args := searchRecentSQL(q, batch, cur)
		rows, err := tx.Query(ctx, `SELECT created_at FROM (`+sql+`) t`, args...)
		if err != nil {
			return sc, fmt.Errorf("search recent: %w", err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return sc, fmt.Errorf("search recent: %w", err)
		}
		times = append(times, got...)
		slices.SortFunc(times, func(a, b time.Time) int { return b.Compare(a) })
		times = times[:min(len(times), q.Limit+1)]
		out.ids, out.floors = append(out.ids, batch.ids...), append(out.floors, batch.floors...)
		if len(times) > q.Limit && next < len(order) {
			if rest := sc.newest[order[next]]; rest != nil && times[q.Limit].After(*rest) {
				break
			}
		}
	}
	return out, nil
}
