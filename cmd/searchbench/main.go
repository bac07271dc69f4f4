//go:build unix

// Command searchbench measures message search (docs/benchmarks.md
// "Search"): it loads a corpus (by default 1,000,000 messages over 10,000
// conversations, English-like words with a Zipf distribution, a fifth in
// Chinese, some Japanese and Korean, interleaved in time as real traffic
// is), and prints
//
//  1. send throughput through group commit (store.Send, -senders at once)
//     without the search column and indexes;
//  2. the time and size of building them (the stored folded body and
//     tsvector columns, the tsvector's GIN index, the trigram index), as
//     migrations 0019, 0020 and 0025 do;
//  3. send throughput again, with them;
//  4. search latency (chat.Service.Search, as the HTTP and RPC routes call
//     it) of a user in -user-convs conversations and of a "heavy" user in
//     -heavy-convs, for a set of queries from very common words to rare
//     ones, substrings and CJK, through both plans (the direct scan of the
//     user's messages and the indexes) and the one chatd picks;
//  5. with -upgrade, the time migration 0025 takes on a database of this
//     size (docs/operations.md, "Upgrading").
//
// Without -database-url it starts a private PostgreSQL (pgembed, fsync on)
// in a temporary directory.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/benchdb"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/store"
)

type options struct {
	databaseURL   string
	messages      int
	conversations int
	userConvs     int
	heavyConvs    int
	senders       int
	sendDuration  time.Duration
	runs          int
	seed          uint64
	sendEachStep  bool
	ginWith       string
	maintain      bool
	steps         int
	upgrade       bool
	dataDir       string // the embedded cluster's, for its CPU time
}

func main() {
	var o options
	flag.StringVar(&o.databaseURL, "database-url", "", "an empty PostgreSQL database to use (default: a temporary embedded cluster, fsync on)")
	flag.IntVar(&o.messages, "messages", 1_000_000, "messages to load")
	flag.IntVar(&o.conversations, "conversations", 10_000, "conversations to spread them over")
	flag.IntVar(&o.userConvs, "user-convs", 200, "conversations the searching user is a member of")
	flag.IntVar(&o.heavyConvs, "heavy-convs", 1_000, "conversations the heavy user is a member of (0: skip)")
	flag.IntVar(&o.senders, "senders", 64, "concurrent senders of the send-throughput runs")
	flag.DurationVar(&o.sendDuration, "send-duration", 15*time.Second, "length of each send-throughput run (0: skip)")
	flag.IntVar(&o.runs, "runs", 40, "runs of each query per plan (after 3 warm-ups)")
	flag.Uint64Var(&o.seed, "seed", 23, "random seed of the corpus")
	flag.BoolVar(&o.sendEachStep, "send-each-step", false, "measure sends after each build step (what each index costs)")
	flag.StringVar(&o.ginWith, "gin-with", "WITH (gin_pending_list_limit = 16384)", `storage parameters of the GIN indexes (migrations 0019's and 0020's by default)`)
	flag.BoolVar(&o.maintain, "maintain", true, "merge the GIN pending lists every second during sends, as chatd does (store.RunSearchMaintenance)")
	flag.IntVar(&o.steps, "steps", 3, "build steps: 1 the column, 2 and its GIN index, 3 and the trigram index")
	flag.BoolVar(&o.upgrade, "upgrade", true, "at the end, time migration 0025's rewrite of the message table (needs -steps 3)")
	flag.Parse()
	if o.messages <= 0 || o.conversations <= 0 || o.userConvs <= 0 || o.userConvs > o.conversations || o.heavyConvs > o.conversations {
		fmt.Fprintln(os.Stderr, "searchbench: -messages and -conversations must be positive, -user-convs and -heavy-convs at most -conversations")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "searchbench:", err)
		os.Exit(1)
	}
}

// The two users who search, and the first id of the others.
const (
	searcher   = 1
	heavy      = 2
	firstOther = 10
	otherUsers = 40_000
)

func run(ctx context.Context, o options) error {
	url, describe, closeDB, err := openDatabase(ctx, &o)
	if err != nil {
		return err
	}
	defer closeDB()
	pool, err := pgembed.OpenPool(ctx, url, int32(o.senders+8))
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Printf("searchbench: %d messages over %d conversations; user %d in %d of them, user %d in %d; %s\n",
		o.messages, o.conversations, searcher, o.userConvs, heavy, o.heavyConvs, describe)

	// The search objects of migrations 0019, 0020 and 0025 go before the load: they are
	// built afterwards, timed, as an upgrade of a full database builds them.
	if _, err := pool.Exec(ctx, `DROP INDEX message_search_idx; DROP INDEX message_body_trgm_idx;
		ALTER TABLE message DROP COLUMN search, DROP COLUMN search_body`); err != nil {
		return fmt.Errorf("drop the search objects: %w", err)
	}
	c, err := load(ctx, pool, o)
	if err != nil {
		return err
	}
	fmt.Printf("load: %s (%d messages visible to user %d, %d to user %d)\n", c.loadTime.Round(time.Millisecond),
		c.visible[searcher], searcher, c.visible[heavy], heavy)
	st := store.New(pool, chat.DefaultLimits(), store.WithBatching(256, 4))
	defer st.Close(context.Background())
	if o.maintain {
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			// Fails quietly until the indexes exist.
			_ = st.RunSearchMaintenance(mctx, time.Second, slog.New(slog.DiscardHandler))
		}()
	}

	var without sendResult
	if o.sendDuration > 0 {
		if without, err = measureSends(ctx, st, c, o); err != nil {
			return err
		}
		fmt.Printf("send without search objects: %s\n", without)
	}
	// Each step of the build, then sends with what it added: what each
	// costs the write path.
	for _, step := range buildSteps(o) {
		if err := build(ctx, pool, step); err != nil {
			return err
		}
		if o.sendDuration > 0 && o.sendEachStep {
			r, err := measureSends(ctx, st, c, o)
			if err != nil {
				return err
			}
			fmt.Printf("  send with it: %s (%.2f of without)\n", r, r.rate()/without.rate())
			printCPURatio(r, without)
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE message`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	printSizes(ctx, pool)
	if o.sendDuration > 0 && !o.sendEachStep {
		with, err := measureSends(ctx, st, c, o)
		if err != nil {
			return err
		}
		fmt.Printf("send with search objects:    %s\n", with)
		fmt.Printf("send throughput with / without: %.2f\n", with.rate()/without.rate())
		printCPURatio(with, without)
	}
	if err := measureSearch(ctx, pool, c, o); err != nil {
		return err
	}
	if o.upgrade && o.steps == 3 {
		return timeUpgrade(ctx, pool, o)
	}
	return nil
}

// timeUpgrade runs what migration 0025 does to the message table, in one
// transaction with the server's default maintenance_work_mem, as Migrate
// runs it: drop the search indexes and columns, add the columns again (a
// rewrite of the table, which rebuilds every other index on it, the
// primary key included) and build the two search indexes. The function
// 0025 creates exists already; creating it costs nothing.
func timeUpgrade(ctx context.Context, pool *pgxpool.Pool, o options) error {
	steps := buildSteps(o)
	t := time.Now()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("upgrade: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{`DROP INDEX message_search_idx`, `DROP INDEX message_body_trgm_idx`,
		`ALTER TABLE message DROP COLUMN search, DROP COLUMN search_body`, steps[0].sql, steps[1].sql, steps[2].sql} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("upgrade: commit: %w", err)
	}
	fmt.Printf("upgrade: migration 0025 on %d messages (rewrite of message and its indexes, then the two search GINs): %s\n",
		o.messages, time.Since(t).Round(100*time.Millisecond))
	return nil
}

func openDatabase(ctx context.Context, o *options) (url, describe string, closeFn func(), err error) {
	if o.databaseURL != "" {
		return o.databaseURL, "database given by -database-url", func() {}, nil
	}
	cl, stop, err := benchdb.Start(ctx, "searchbench", map[string]string{
		"max_connections":      strconv.Itoa(max(100, 2*o.senders+20)),
		"shared_buffers":       "512MB",
		"maintenance_work_mem": "256MB",
		"max_wal_size":         "4GB",
	})
	if err != nil {
		return "", "", nil, err
	}
	o.dataDir = cl.DataDir()
	return cl.URL("searchbench"), "embedded PostgreSQL 15, fsync on, shared_buffers 512MB", stop, nil
}

// corpus is what load made.
type corpus struct {
	members  map[int64][]int64 // conversation -> members
	convs    []int64
	visible  map[int64]int64 // user -> messages in their conversations
	loadTime time.Duration
	words    []string // the vocabulary, most frequent first
	freq     map[string]int
}

// words: chat-like English for the most frequent ranks, then made-up
// words, so queries of every frequency exist and can be named.
var commonWords = strings.Fields(`the to you i a and it is in for that of on ok me we have be
	so are this at can just with what do not your will no my but all get was how
	yes lol now time see if know good send call today going tomorrow think need back about one
	meeting please thanks later work home here there when where then let sure great night morning
	coming done right who want some more from like can't also well come will love maybe make
	dinner lunch office week weekend train flight hotel project report invoice contract budget
	photos video birthday party gym doctor coffee tea movie music game match school exam`)

var syllables = strings.Fields("ka lo mi ne ru sa to vi ze po qu di fa gu he ji bra tel mon dre sik vor lan pet")

func vocabulary(n int) []string {
	out := slices.Clone(commonWords)
	seen := map[string]bool{}
	for _, w := range out {
		seen[w] = true
	}
	for i := 0; len(out) < n; i++ {
		n := len(syllables)
		w := syllables[i%n] + syllables[(i/n)%n] + syllables[(i/(n*n))%n]
		if i >= n*n*n {
			w += syllables[(i/(n*n*n))%n]
		}
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// hanPool is 2,500 Han characters; 北京 and 开会 are planted so that
// queries with known frequencies exist.
func hanPool(r *rand.Rand) []rune {
	pool := make([]rune, 0, 2500)
	for _, c := range "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明社长" {
		pool = append(pool, c)
	}
	for len(pool) < 2500 {
		pool = append(pool, rune(0x4e00+r.IntN(0x9fff-0x4e00)))
	}
	return pool
}

func load(ctx context.Context, pool *pgxpool.Pool, o options) (*corpus, error) {
	start := time.Now()
	r := rand.New(rand.NewPCG(o.seed, 42))
	c := &corpus{members: map[int64][]int64{}, visible: map[int64]int64{}, freq: map[string]int{}}
	c.words = vocabulary(20_000)
	wordZipf := rand.NewZipf(r, 1.07, 2, uint64(len(c.words)-1))
	han := hanPool(r)
	hanZipf := rand.NewZipf(r, 1.05, 3, uint64(len(han)-1))

	// Conversations and members: 2 to 8 members each, the searching users
	// in a random subset.
	perm := r.Perm(o.conversations)
	inSearcher, inHeavy := map[int]bool{}, map[int]bool{}
	for _, i := range perm[:o.userConvs] {
		inSearcher[i] = true
	}
	for _, i := range perm[len(perm)-o.heavyConvs:] {
		inHeavy[i] = true
	}
	var mconv, muser []int64
	for i := range o.conversations {
		id := int64(i + 1)
		c.convs = append(c.convs, id)
		n := 2 + r.IntN(7)
		ms := map[int64]bool{}
		if inSearcher[i] {
			ms[searcher] = true
		}
		if inHeavy[i] {
			ms[heavy] = true
		}
		for len(ms) < n {
			ms[int64(firstOther+r.IntN(otherUsers))] = true
		}
		for u := range ms {
			c.members[id] = append(c.members[id], u)
			mconv, muser = append(mconv, id), append(muser, u)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO conversation (id, type, title, history_visible)
		SELECT i, 'GROUP', 'group ' || i, 'all' FROM generate_series(1, $1::int) i`, o.conversations); err != nil {
		return nil, fmt.Errorf("insert conversations: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT setval('conversation_id_seq', $1::bigint)`, o.conversations); err != nil {
		return nil, fmt.Errorf("move the id sequence: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO conversation_member (conversation_id, user_id, role)
		SELECT c, u, 'member' FROM unnest($1::bigint[], $2::bigint[]) AS t(c, u)`, mconv, muser); err != nil {
		return nil, fmt.Errorf("insert members: %w", err)
	}

	// Messages, in time order over the last year; conversations chosen
	// with a mild skew (some are busier).
	convZipf := rand.NewZipf(r, 1.01, 50, uint64(o.conversations-1))
	convOrder := r.Perm(o.conversations)
	seqs := make([]int64, o.conversations+1)
	t0 := time.Now().Add(-365 * 24 * time.Hour)
	step := 365 * 24 * time.Hour / time.Duration(o.messages)
	rows := make([][]any, 0, 50_000)
	flush := func() error {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"message"},
			[]string{"conversation_id", "seq", "sender_id", "client_msg_id", "body", "created_at", "msg_no"}, pgx.CopyFromRows(rows))
		rows = rows[:0]
		if err != nil {
			return fmt.Errorf("copy messages: %w", err)
		}
		return nil
	}
	var b strings.Builder
	for i := range o.messages {
		conv := int64(convOrder[convZipf.Uint64()] + 1)
		seqs[conv]++
		ms := c.members[conv]
		sender := ms[r.IntN(len(ms))]
		b.Reset()
		switch x := r.Float64(); {
		case x < 0.20: // Chinese
			n := 6 + r.IntN(25)
			for k := 0; k < n; k++ {
				if k > 0 && r.Float64() < 0.01 {
					b.WriteString("北京")
				}
				if k > 0 && r.Float64() < 0.02 {
					b.WriteString("开会")
				}
				b.WriteRune(han[hanZipf.Uint64()])
				if r.Float64() < 0.08 {
					b.WriteRune('，')
				}
			}
		case x < 0.23: // Japanese
			b.WriteString([]string{"明日は", "今日は", "東京で", "会議が", "よろしくお願いします", "ありがとう"}[r.IntN(6)])
			for k := 0; k < 5+r.IntN(10); k++ {
				b.WriteRune(rune(0x3041 + r.IntN(0x3093-0x3041)))
			}
		case x < 0.25: // Korean
			b.WriteString([]string{"내일 ", "오늘 ", "학교에서 ", "회의 ", "감사합니다 "}[r.IntN(5)])
			for k := 0; k < 3+r.IntN(8); k++ {
				b.WriteRune(rune(0xac00 + r.IntN(0xd7a3-0xac00)))
			}
		default:
			n := 3 + r.IntN(18)
			for k := 0; k < n; k++ {
				if k > 0 {
					b.WriteByte(' ')
				}
				w := c.words[wordZipf.Uint64()]
				c.freq[w]++
				b.WriteString(w)
			}
		}
		rows = append(rows, []any{conv, seqs[conv], sender, uuid.New(), b.String(), t0.Add(time.Duration(i) * step), seqs[conv]})
		if len(rows) == cap(rows) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if len(rows) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if _, err := pool.Exec(ctx, `
		UPDATE conversation c SET last_seq = m.n, message_count = m.n, last_message_seq = m.n, last_message_at = m.at
		FROM (SELECT conversation_id, max(seq) AS n, max(created_at) AS at FROM message GROUP BY conversation_id) m
		WHERE c.id = m.conversation_id`); err != nil {
		return nil, fmt.Errorf("count messages: %w", err)
	}
	for _, u := range []int64{searcher, heavy} {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(c.message_count), 0) FROM conversation_member m
			JOIN conversation c ON c.id = m.conversation_id WHERE m.user_id = $1`, u).Scan(&n); err != nil {
			return nil, fmt.Errorf("count visible messages: %w", err)
		}
		c.visible[u] = n
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	c.loadTime = time.Since(start)
	return c, nil
}

// buildStep is one search object of the message table, as migration 0025
// makes it (after 0019 and 0020).
type buildStep struct{ name, sql string }

func buildSteps(o options) []buildStep {
	return []buildStep{
		{"stored search columns (table rewrite)", `ALTER TABLE message ADD COLUMN search_body text GENERATED ALWAYS AS (
			CASE WHEN kind = 'message' THEN chat_search_fold(body) END) STORED,
			ADD COLUMN search tsvector GENERATED ALWAYS AS (
			CASE WHEN kind = 'message' THEN to_tsvector('simple'::regconfig, chat_search_document(chat_search_words(COALESCE(chat_search_fold(body), body)))) END) STORED`},
		{"GIN index on it", `CREATE INDEX message_search_idx ON message USING gin (search) ` + o.ginWith + `
			WHERE kind = 'message' AND recalled_at IS NULL`},
		{"trigram GIN index on the folded body", `CREATE INDEX message_body_trgm_idx ON message USING gin ((COALESCE(search_body, body)) gin_trgm_ops) ` + o.ginWith + `
			WHERE kind = 'message' AND recalled_at IS NULL`},
	}[:o.steps]
}

// build runs one step, timed.
func build(ctx context.Context, pool *pgxpool.Pool, s buildStep) error {
	t := time.Now()
	if _, err := pool.Exec(ctx, `SET maintenance_work_mem = '256MB'; `+s.sql); err != nil {
		return fmt.Errorf("build %s: %w", s.name, err)
	}
	fmt.Printf("build %-38s %8s\n", s.name, time.Since(t).Round(100*time.Millisecond))
	return nil
}

func printSizes(ctx context.Context, pool *pgxpool.Pool) {
	size := func(rel string) int64 {
		var n int64
		_ = pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, rel).Scan(&n)
		return n
	}
	var total int64
	_ = pool.QueryRow(ctx, `SELECT pg_total_relation_size('message')`).Scan(&total)
	fmt.Printf("sizes: message table %s, search GIN %s, trigram GIN %s, table with all its indexes %s\n",
		mib(size("message")), mib(size("message_search_idx")), mib(size("message_body_trgm_idx")), mib(total))
}

// printCPURatio says what the CPU per message predicts for throughput.
func printCPURatio(with, without sendResult) {
	if with.pgCPU == 0 || without.pgCPU == 0 {
		return
	}
	_, w := with.cpuPerMessage()
	_, wo := without.cpuPerMessage()
	fmt.Printf("  CPU-bound throughput with / without (CPU per message without / with): %.2f\n", float64(wo)/float64(w))
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

type sendResult struct {
	n, senders, errs int
	firstErr         string // the first failed send's error, to say what failed
	elapsed          time.Duration
	lat              []time.Duration
	pgCPU, selfCPU   float64 // seconds over the run
}

// cpuPerMessage is the CPU time one send cost, PostgreSQL's and this
// process's (the store, group commit): what bounds throughput on a
// CPU-bound server.
func (s sendResult) cpuPerMessage() (pg, all time.Duration) {
	per := func(sec float64) time.Duration { return time.Duration(sec / float64(s.n) * float64(time.Second)) }
	return per(s.pgCPU), per(s.pgCPU + s.selfCPU)
}

func (s sendResult) rate() float64 { return float64(s.n) / s.elapsed.Seconds() }

func (s sendResult) String() string {
	out := fmt.Sprintf("%7.0f messages/s (%d senders, %d in %s, %d errors) p50 %s p99 %s", s.rate(), s.senders,
		s.n, s.elapsed.Round(time.Millisecond), s.errs, pct(s.lat, 0.50), pct(s.lat, 0.99))
	if s.firstErr != "" {
		out += fmt.Sprintf(" (first error: %s)", s.firstErr)
	}
	if s.pgCPU > 0 {
		pg, all := s.cpuPerMessage()
		out += fmt.Sprintf("; CPU per message: PostgreSQL %s, with the sender %s", pg.Round(time.Microsecond), all.Round(time.Microsecond))
	}
	return out
}

// measureSends runs -senders goroutines sending English-like messages to
// random conversations as random members, through group commit.
func measureSends(ctx context.Context, st *store.Store, c *corpus, o options) (sendResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.sendDuration)
	defer cancel()
	var (
		mu   sync.Mutex
		res  sendResult
		n    atomic.Int64
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	start, pg0, self0 := time.Now(), clusterCPU(o.dataDir), selfCPU()
	for g := range o.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var lat []time.Duration
			for ctx.Err() == nil {
				conv := c.convs[r.IntN(len(c.convs))]
				ms := c.members[conv]
				var b strings.Builder
				for k := range 8 {
					if k > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(c.words[r.IntN(2000)])
				}
				t := time.Now()
				// A send of its own deadline: under the run's, the last
				// batch's statement timeout (the time left to it) would
				// cancel sends as the run ends and count them failed.
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := st.Send(sctx, chat.SendRequest{ConversationID: conv, SenderID: ms[r.IntN(len(ms))], ClientMsgID: uuid.NewString(), Body: b.String()})
				cancel()
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						res.firstErr = err.Error()
						mu.Unlock()
					}
					continue
				}
				lat = append(lat, time.Since(t))
				n.Add(1)
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed, res.n, res.errs, res.senders = time.Since(start), int(n.Load()), int(errs.Load()), o.senders
	if o.dataDir != "" {
		res.pgCPU, res.selfCPU = clusterCPU(o.dataDir)-pg0, selfCPU()-self0
	}
	if res.n == 0 {
		return res, errors.New("no send succeeded")
	}
	return res, nil
}

// query is one search the benchmark runs.
type query struct {
	name, text string
	conv       bool // narrowed to one of the user's conversations
}

func queries(c *corpus) []query {
	// Latin words by how often they occur: rank 1, ~100, ~2,000 and a
	// rare one that still occurs.
	type wf struct {
		w string
		n int
	}
	var byFreq []wf
	for w, n := range c.freq {
		byFreq = append(byFreq, wf{w, n})
	}
	// Ties by the word, so that a rank names the same word in every run.
	slices.SortFunc(byFreq, func(a, b wf) int { return cmp.Or(b.n-a.n, strings.Compare(a.w, b.w)) })
	at := func(rank int) string { return byFreq[min(rank, len(byFreq)-1)].w }
	rare := at(len(byFreq) * 9 / 10)
	qs := []query{
		{"most common word", at(0), false},
		{"word of rank 100", at(100), false},
		{"word of rank 2000", at(2000), false},
		{"rare word", rare, false},
		{"two words", "meeting tomorrow", false},
		{"substring (4 letters)", "ting", false},
		{"prefix (2 letters)", "to", false},
		{"CJK: 北京 (planted, 1%)", "北京", false},
		{"CJK: 开会 (planted, 2%)", "开会", false},
		{"CJK: 3 characters", "北京开", false},
		{"CJK: one character", "的", false},
		{"Japanese", "会議", false},
		{"Korean", "학교", false},
		{"common word, one conversation", at(0), true},
	}
	for i := range qs {
		if n := c.freq[qs[i].text]; n > 0 {
			qs[i].name += fmt.Sprintf(" %q (%d messages)", qs[i].text, n)
		}
	}
	return qs
}

func measureSearch(ctx context.Context, pool *pgxpool.Pool, c *corpus, o options) error {
	plans := []struct {
		name string
		opts []store.Option
	}{{"chatd's choice", nil}, {"direct scan", []store.Option{store.WithSearchScanLimit(-1)}}, {"indexes", []store.Option{store.WithSearchScanLimit(0)}}}
	users := []int64{searcher}
	if o.heavyConvs > 0 {
		users = append(users, heavy)
	}
	qs := queries(c)
	for _, u := range users {
		var conv int64
		for _, id := range c.convs {
			if slices.Contains(c.members[id], u) {
				conv = id
				break
			}
		}
		fmt.Printf("\nsearch as user %d (%d conversations, %d messages visible), %d runs each, 20 hits a page:\n",
			u, countConvs(c, u), c.visible[u], o.runs)
		fmt.Printf("  %-58s %22s %22s %22s\n", "query", "chatd's choice p50/p99", "direct scan p50/p99", "indexes p50/p99")
		all := make([][]time.Duration, len(plans))
		for _, q := range qs {
			line := fmt.Sprintf("  %-58s", q.name)
			for pi, p := range plans {
				svc := chat.NewService(store.New(pool, chat.DefaultLimits(), p.opts...), chat.DefaultLimits())
				sq := chat.SearchQuery{UserID: u, Text: q.text, Limit: 20}
				if q.conv {
					sq.ConversationID = conv
				}
				var lat []time.Duration
				for i := -3; i < o.runs; i++ {
					t := time.Now()
					page, err := svc.Search(ctx, sq)
					if err != nil {
						return fmt.Errorf("search %q: %w", q.text, err)
					}
					if i >= 0 {
						lat = append(lat, time.Since(t))
					}
					if i == 0 && page.NextCursor != "" {
						// The second page, through the cursor, counts too.
						sq2 := sq
						sq2.Cursor = page.NextCursor
						t := time.Now()
						if _, err := svc.Search(ctx, sq2); err != nil {
							return fmt.Errorf("search %q page 2: %w", q.text, err)
						}
						lat = append(lat, time.Since(t))
					}
				}
				all[pi] = append(all[pi], lat...)
				line += fmt.Sprintf(" %22s", pct(lat, 0.5).String()+" / "+pct(lat, 0.99).String())
			}
			fmt.Println(line)
		}
		line := fmt.Sprintf("  %-58s", "all queries")
		for pi := range plans {
			line += fmt.Sprintf(" %22s", pct(all[pi], 0.5).String()+" / "+pct(all[pi], 0.99).String())
		}
		fmt.Println(line)
	}
	return nil
}

func countConvs(c *corpus, u int64) int {
	n := 0
	for _, ms := range c.members {
		if slices.Contains(ms, u) {
			n++
		}
	}
	return n
}

// pct is the p-th percentile of ds, rounded for printing.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	d := s[i]
	switch {
	case d > 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d > time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
