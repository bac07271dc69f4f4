package store

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// The plan of a search (see Store.Search): the direct scan costs about the
// same per message the caller can see as the indexes cost per candidate
// they return times searchIndexCandidatesPerScan; the candidates of a
// query are those of its rarest term, estimated from the lexeme
// frequencies ANALYZE keeps for the search column (pg_stats).
const (
	// searchScanAlways: up to this many visible messages the scan is
	// always cheap.
	searchScanAlways = 2000
	// searchIndexCandidatesPerScan: the indexes go through this many
	// candidates in the time the scan tests one message (measured: 1M
	// messages, a word in 61% of them, 0.1 µs a candidate; the scan
	// 2.3 µs a message).
	searchIndexCandidatesPerScan = 16
	// searchCommonShare: a term at least this share of all messages hold
	// carries no relevance, like a stop word: a query of only such terms
	// is listed by recency alone (searchByRecency).
	searchCommonShare = 0.2
	// searchTrigramWordShare: a substring term rarer than this as a
	// word is given to the trigram index as its trigrams
	// (searchAsTrigrams).
	searchTrigramWordShare = 0.005
	// searchStatsTTL: how long the frequencies are reused (ANALYZE
	// changes them slowly).
	searchStatsTTL = 5 * time.Minute
)

// searchStats caches the search column's most common lexemes and their
// frequencies.
type searchStats struct {
	mu     sync.Mutex
	at     time.Time
	rows   float64            // the message table's estimated rows
	freq   map[string]float64 // lexeme -> share of rows holding it
	lowest float64            // a lexeme not in freq is at most this common
	query  string             // "" is searchStatsSQL (tests break it)
}

// searchStatsSQL reads the message table's estimated rows and the search
// column's most common lexemes with their frequencies.
const searchStatsSQL = `
		SELECT GREATEST(c.reltuples, 0)::float8, COALESCE(s.most_common_elems::text::text[], '{}'),
		       COALESCE(s.most_common_elem_freqs, '{}')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = 'message' AND s.attname = 'search'
		WHERE c.oid = 'message'::regclass`

// searchByScan reports whether q's terms are better served by the direct
// scan of the caller's visible messages than by the indexes.
func (s *Store) searchByScan(ctx context.Context, tx pgx.Tx, terms []chat.SearchTerm, visible int64) bool {
	if s.searchScan != nil {
		if *s.searchScan < 0 {
			return true
		}
		return visible <= *s.searchScan
	}
	switch {
	case visible <= searchScanAlways:
		return true
	case visible > SearchScanLimit:
		return false
	}
	rows, freq, lowest := s.lexemeFrequencies(ctx, tx)
	candidates := math.Inf(1)
	for _, t := range terms {
		candidates = min(candidates, termCandidates(t, rows, freq, lowest))
	}
	return candidates > float64(searchIndexCandidatesPerScan*visible)
}

// searchByRecency reports whether every term of q is one that at least
// searchCommonShare of all messages hold (by the column's statistics):
// ranking would then order most of the caller's messages by a relevance
// that tells them apart by little more than length, and costs reading
// every match before the first page is known. Listed by recency alone,
// a page reads the newest messages of the most recently active
// conversations and stops (recentScope).
// A term counts by its own lexeme, which its matches include (a prefix or
// substring matches more): a lower bound; a CJK term of one or two
// characters is its lexeme, one of three or more a phrase, rarer than its
// bigrams, that never counts.
func (s *Store) searchByRecency(ctx context.Context, tx pgx.Tx, terms []chat.SearchTerm) bool {
	if len(terms) == 0 {
		return false
	}
	_, freq, _ := s.lexemeFrequencies(ctx, tx)
	for _, t := range terms {
		if t.CJK && len([]rune(t.Text)) > 2 {
			return false
		}
		if freq[t.Text] < searchCommonShare {
			return false
		}
	}
	return true
}

// searchAsTrigrams returns the substring terms to give the trigram index
// as one ILIKE per trigram ('%nen%' AND '%ene%' for "nenene") rather than
// as one ILIKE of the whole term. PostgreSQL estimates an ILIKE from a
// hundred sampled bodies, never below a ten-thousandth of the table: a
// term rarer than that sample can see is estimated at that floor however
// many messages hold its trigrams, which are what the index returns, each
// to be fetched and tested. Believing the floor, it fetches them all
// rather than first intersecting the index's candidates with the caller's
// conversations (BitmapAnd with the primary key): 15,683 fetches for the
// 9 hits of a rare word with common trigrams on cmd/searchbench's corpus.
// Each trigram of such a term is common enough for the sample to see, so
// their estimate follows the candidates and the intersection is chosen.
// A term common as a word keeps the single ILIKE: the sample sees it,
// and estimating its trigrams apart, as if independent, would
// underestimate it. Only ASCII letters and digits are split: with the C
// collation pg_trgm drops other characters, and a window of them could
// hold no trigram, which it answers by reading the whole index.
func (s *Store) searchAsTrigrams(ctx context.Context, tx pgx.Tx, terms []chat.SearchTerm) map[string]bool {
	out := map[string]bool{}
	for _, t := range terms {
		if !t.Substring() || len(t.Text) == 3 || !asciiAlnum(t.Text) {
			continue // not a substring, one trigram already, or not splittable
		}
		if _, freq, _ := s.lexemeFrequencies(ctx, tx); freq[t.Text] < searchTrigramWordShare {
			out[t.Text] = true
		}
	}
	return out
}

func asciiAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// termCandidates estimates how many rows the indexes return for t.
func termCandidates(t chat.SearchTerm, rows float64, freq map[string]float64, lowest float64) float64 {
	rs := []rune(t.Text)
	share := func(lexeme string) float64 {
		if f, ok := freq[lexeme]; ok {
			return f
		}
		return lowest
	}
	switch {
	case len(rs) <= 2 && !t.CJK:
		// A prefix of one or two letters: the union of every lexeme
		// that starts with it.
		return math.Inf(1)
	case len(rs) <= 2:
		// One CJK character or two: a lexeme of the document.
		return share(t.Text) * rows
	case t.CJK:
		// A phrase of bigrams: no more than its rarest bigram.
		f := 1.0
		for i := 0; i+1 < len(rs); i++ {
			f = min(f, share(string(rs[i:i+2])))
		}
		return f * rows
	default:
		// A substring (trigrams): at least the messages that hold it
		// as a word.
		return share(t.Text) * rows
	}
}

// lexemeFrequencies returns the cached statistics, refreshed when stale.
// Without statistics (no ANALYZE yet) every lexeme counts as rare.
func (s *Store) lexemeFrequencies(ctx context.Context, tx pgx.Tx) (float64, map[string]float64, float64) {
	st := &s.searchStats
	st.mu.Lock()
	defer st.mu.Unlock()
	if time.Since(st.at) < searchStatsTTL && st.freq != nil {
		return st.rows, st.freq, st.lowest
	}
	var (
		rows  float64
		elems []string
		freqs []float32
	)
	query := searchStatsSQL
	if st.query != "" {
		query = st.query
	}
	// Under a savepoint: a failure (a timeout, a permission) would
	// otherwise abort the search's transaction, and the search with it.
	sp, err := tx.Begin(ctx)
	if err == nil {
		if err = sp.QueryRow(ctx, query).Scan(&rows, &elems, &freqs); err == nil {
			err = sp.Commit(ctx)
		} else if rerr := sp.Rollback(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	st.at = time.Now()
	if err != nil {
		// Searching still works, by the indexes; retried after the TTL.
		slog.Warn("read the search column's statistics", "err", err)
		st.rows, st.freq, st.lowest = 0, map[string]float64{}, 0
		return st.rows, st.freq, st.lowest
	}
	st.rows, st.freq, st.lowest = rows, make(map[string]float64, len(elems)), 0
	for i, e := range elems {
		if i >= len(freqs) {
			break
		}
		f := float64(freqs[i])
		st.freq[e] = f
		if st.lowest == 0 || f < st.lowest {
			st.lowest = f
		}
	}
	return st.rows, st.freq, st.lowest
}
