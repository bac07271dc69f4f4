//go:build unix

// Command sendbench measures the send path: N goroutines call store.Send on
// random members of random group conversations for a fixed time, and it
// prints messages/s and latency percentiles. With -pgbench it then runs the
// seed's reference send transaction (/work/shared/reference), adapted to
// this schema, through pgbench against the same database, so the two figures
// come from one PostgreSQL under one configuration.
//
// Without -database-url it starts a private PostgreSQL (pgembed) in a
// temporary directory with fsync on, because a send is only as fast as its
// commit, and a figure measured without fsync says nothing about production.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/benchdb"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/store"
)

// membersPerConversation mirrors the reference workload: users 1..5 in every
// conversation, user 1 the owner.
const membersPerConversation = 5

// body is the reference workload's message.
const body = "hello world this is a chat message of moderate length"

// pgbenchScript is the seed's send transaction (seed-send-transaction.pgbench.sql)
// on this schema. It does slightly less than store.Send: no membership
// check, and a smaller outbox payload (no clientMsgId, body or createdAt).
const pgbenchScript = `\set c random(:cmin, :cmax)
\set u random(1, 5)
BEGIN;
SELECT last_seq FROM conversation WHERE id = :c FOR UPDATE \gset
SELECT seq FROM message WHERE conversation_id = :c AND client_msg_id = gen_random_uuid();
INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no) VALUES (:c, :last_seq + 1, :u, gen_random_uuid(), '` + body + `', :last_seq + 1);
UPDATE conversation SET last_seq = :last_seq + 1, last_message_at = now() WHERE id = :c;
UPDATE conversation_member SET last_read_seq = GREATEST(last_read_seq, :last_seq + 1) WHERE conversation_id = :c AND user_id = :u;
INSERT INTO outbox (msg_key, type, payload) VALUES (:c::text, 'message.new', jsonb_build_object('type', 'message.new', 'conversationId', :c::bigint, 'seq', :last_seq::bigint + 1, 'senderId', :u::bigint));
COMMIT;
`

type options struct {
	databaseURL   string
	senders       int
	conversations int
	duration      time.Duration
	pgbench       bool
	outboxTrigger bool
	maxInflight   int
	printScript   bool
}

func main() {
	var o options
	flag.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL to use (default: a temporary embedded cluster, fsync on)")
	flag.IntVar(&o.senders, "senders", 8, "concurrent senders (and pgbench clients)")
	flag.IntVar(&o.conversations, "conversations", 1000, "group conversations to create, 5 members each")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long each measurement runs")
	flag.BoolVar(&o.pgbench, "pgbench", false, "also run the reference send transaction through pgbench")
	flag.BoolVar(&o.outboxTrigger, "outbox-triggers", true, "keep the user triggers on outbox (false measures what they cost)")
	flag.IntVar(&o.maxInflight, "max-inflight", 4, "group-commit transactions in flight at most; 0 = one transaction per send")
	flag.BoolVar(&o.printScript, "print-script", false, "print the reference send transaction (a pgbench script; :cmin, :cmax pick conversations) and exit")
	flag.Parse()
	if o.printScript {
		fmt.Print(pgbenchScript)
		return
	}
	if o.senders <= 0 || o.conversations <= 0 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "sendbench: -senders, -conversations and -duration must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "sendbench:", err)
		os.Exit(1)
	}
}

// target is the database under test and how pgbench reaches it.
type target struct {
	url         string
	pgbenchConn []string // connection arguments for pgbench
	describe    string
	close       func()
}

func run(ctx context.Context, o options) error {
	db, err := openTarget(ctx, o)
	if err != nil {
		return err
	}
	defer db.close()

	pool, err := pgembed.OpenPool(ctx, db.url, int32(o.senders+2))
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	st := store.New(pool, chat.DefaultLimits(), store.WithBatching(256, o.maxInflight))
	defer st.Close(context.Background())
	if !o.outboxTrigger {
		// Diagnostic only: on a shared database this would silence the
		// relay's wake-ups for everyone.
		if _, err := pool.Exec(ctx, `ALTER TABLE outbox DISABLE TRIGGER USER`); err != nil {
			return fmt.Errorf("disable outbox triggers: %w", err)
		}
		defer func() {
			_, _ = pool.Exec(context.WithoutCancel(ctx), `ALTER TABLE outbox ENABLE TRIGGER USER`)
		}()
	}

	fmt.Printf("database: %s, outbox triggers %s\n", db.describe, map[bool]string{true: "on", false: "off"}[o.outboxTrigger])
	fmt.Printf("setup: creating %d group conversations x %d members...\n", o.conversations, membersPerConversation)
	convs, err := createConversations(ctx, st, o.conversations, o.senders)
	if err != nil {
		return err
	}

	r := measure(ctx, st, convs, o.senders, o.duration)
	if r.firstErr != nil {
		fmt.Printf("warning: %d sends failed; first: %v\n", r.errors, r.firstErr)
	}
	fmt.Printf("store.Send  %d senders: %8.0f messages/s  (%d in %s)  p50 %s  p99 %s\n",
		o.senders, r.rate(), len(r.latencies), r.elapsed.Round(time.Millisecond),
		percentile(r.latencies, 0.50), percentile(r.latencies, 0.99))

	if !o.pgbench {
		return nil
	}
	// pgbench picks ids from a range, so it needs the ones just created to
	// be contiguous; they are unless something else creates conversations.
	lo, hi := convs[0], convs[len(convs)-1]
	if hi-lo+1 != int64(len(convs)) {
		return fmt.Errorf("pgbench: conversation ids %d..%d are not contiguous; run against a quiet database", lo, hi)
	}
	pb, err := runPgbench(ctx, db, o, lo, hi)
	if err != nil {
		return err
	}
	fmt.Printf("pgbench     %d clients: %8.0f tps         (latency average %s ms)\n", o.senders, pb.tps, pb.latencyAvg)
	fmt.Printf("store.Send / pgbench: %.2f\n", r.rate()/pb.tps)
	fmt.Printf("pgbench command: %s\n", pb.command)
	return nil
}

func openTarget(ctx context.Context, o options) (target, error) {
	if o.databaseURL != "" {
		// libpq takes a URL or keyword string in place of the database name.
		return target{url: o.databaseURL, pgbenchConn: []string{o.databaseURL},
			describe: "given by -database-url", close: func() {}}, nil
	}
	const dbname = "sendbench"
	c, stop, err := benchdb.Start(ctx, dbname, map[string]string{"max_connections": strconv.Itoa(max(100, 2*o.senders+20))})
	if err != nil {
		return target{}, err
	}
	socketDir := filepath.Dir(c.SocketPath())
	port := strings.TrimPrefix(filepath.Ext(c.SocketPath()), ".")
	return target{
		url:         c.URL(dbname),
		pgbenchConn: []string{"-h", socketDir, "-p", port, "-U", "postgres", dbname},
		describe:    fmt.Sprintf("embedded PostgreSQL, fsync on, socket %s", c.SocketPath()),
		close:       stop,
	}, nil
}

// createConversations makes n groups with users 1..5 and returns their ids
// ascending.
func createConversations(ctx context.Context, st *store.Store, n, workers int) ([]int64, error) {
	ids := make([]int64, n)
	members := []int64{2, 3, 4, 5}
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error {
			conv, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "bench " + strconv.Itoa(i), Members: members})
			ids[i] = conv.ID
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("create conversations: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

type result struct {
	latencies []time.Duration
	elapsed   time.Duration
	errors    int
	firstErr  error
}

func (r result) rate() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

// measure runs senders goroutines for d, each sending as a random member
// into a random conversation, and collects per-send latencies.
func measure(ctx context.Context, st *store.Store, convs []int64, senders int, d time.Duration) result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu  sync.Mutex
		res result
		wg  sync.WaitGroup
	)
	start := time.Now()
	end, _ := ctx.Deadline()
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(g)))
			lat := make([]time.Duration, 0, 1<<14)
			var errs int
			var firstErr error
			for ctx.Err() == nil {
				req := chat.SendRequest{
					ConversationID: convs[rng.IntN(len(convs))],
					SenderID:       1 + rng.Int64N(membersPerConversation),
					ClientMsgID:    uuid.NewString(),
					Body:           body,
				}
				t0 := time.Now()
				_, err := st.Send(ctx, req)
				if err != nil {
					// The deadline ending the run is not a failure. Check
					// the clock too, with a margin: PostgreSQL enforces a
					// batch's deadline (statement_timeout, whole
					// milliseconds, rounded down), so a send in the last
					// batch fails just before ctx's own timer fires and
					// sets ctx.Err(), and the loop would count every retry
					// in that instant.
					if ctx.Err() == nil && time.Until(end) > 10*time.Millisecond {
						errs++
						if firstErr == nil {
							firstErr = err
						}
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res
}

// percentile of sorted durations, nearest-rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)].Round(10 * time.Microsecond)
}

type pgbenchResult struct {
	tps        float64
	latencyAvg string
	command    string
}

var (
	tpsRE     = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	latencyRE = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

func runPgbench(ctx context.Context, db target, o options, lo, hi int64) (pgbenchResult, error) {
	bin, err := findPgbench()
	if err != nil {
		return pgbenchResult{}, err
	}
	f, err := os.CreateTemp("", "sendbench-*.pgbench.sql")
	if err != nil {
		return pgbenchResult{}, fmt.Errorf("pgbench script: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(pgbenchScript); err != nil {
		f.Close()
		return pgbenchResult{}, fmt.Errorf("pgbench script: %w", err)
	}
	if err := f.Close(); err != nil {
		return pgbenchResult{}, fmt.Errorf("pgbench script: %w", err)
	}
	args := []string{"-n", "-M", "prepared", "-f", f.Name(),
		"-c", strconv.Itoa(o.senders), "-j", "2", "-T", strconv.Itoa(int(math.Ceil(o.duration.Seconds()))),
		"-D", fmt.Sprintf("cmin=%d", lo), "-D", fmt.Sprintf("cmax=%d", hi)}
	args = append(args, db.pgbenchConn...)
	cmd := exec.CommandContext(ctx, bin, args...)
	command := bin + " " + strings.Join(args, " ")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return pgbenchResult{}, fmt.Errorf("run %s: %w\n%s", command, err, out)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		return pgbenchResult{}, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return pgbenchResult{}, fmt.Errorf("pgbench tps %q: %w", m[1], err)
	}
	res := pgbenchResult{tps: tps, latencyAvg: "?", command: command}
	if l := latencyRE.FindSubmatch(out); l != nil {
		res.latencyAvg = string(l[1])
	}
	return res, nil
}

// findPgbench prefers the pgbench next to the server binaries pgembed uses,
// so client and server versions match, then PATH.
func findPgbench() (string, error) {
	if dir, err := pgembed.FindBinaries(); err == nil {
		p := filepath.Join(dir, "pgbench")
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("pgbench")
	if err != nil {
		return "", errors.New("pgbench not found next to initdb or in PATH (Debian: apt-get install postgresql-contrib or postgresql-client)")
	}
	return p, nil
}
