package faults_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestOfflineClientConvergesToTheOnlineViewByCatchUpAlone: three users send,
// reply, edit, recall and react (300 changes, concurrently) in a group while
// one device of user 2 is online throughout and another, with a persistent
// session, is offline; chatd is SIGKILLed and restarted halfway. When the
// offline device comes back, the view it builds from its events alone
// equals the online device's, the one built from history, and what the
// database holds. Then the same across two nodes joined by Kafka: the
// changes are made on one node, both devices use the other.
func TestOfflineClientConvergesToTheOnlineViewByCatchUpAlone(t *testing.T) {
	t.Run("across a kill -9 of chatd", func(t *testing.T) {
		url := pgtest.NewDB(t)
		p := newProc(t, url, nil)
		p.start()
		addr := func() string { return p.MQTT }
		convergence(t, url, addr, addr, func() { p.kill(); p.start() })
	})
	t.Run("across two nodes over Kafka", func(t *testing.T) {
		url := pgtest.NewDB(t)
		port := testkit.FreePort(t)
		startKafka(t, port, "")
		kafka := map[string]string{"CHAT_KAFKA_BROKERS": fmt.Sprintf("127.0.0.1:%d", port)}
		a := newProc(t, url, withVars(kafka, "CHAT_NODE_ID", "node-a"))
		b := newProc(t, url, withVars(kafka, "CHAT_NODE_ID", "node-b"))
		a.start()
		b.start()
		convergence(t, url, func() string { return a.MQTT }, func() string { return b.MQTT }, nil)
	})
}

func withVars(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// convergence runs the scenario: actors connect to actorAddr, user 2's
// devices to viewAddr; midway runs once half the changes are made.
func convergence(t *testing.T, url string, actorAddr, viewAddr func() string, midway func()) {
	pool := openPool(t, url, 4)
	svc := newService(pool)
	ctx := context.Background()
	g := mustGroup(t, svc, "lifecycle", []int64{2, 3})
	conv := g.ID

	offlineDir := t.TempDir()
	offline := startClient(t, viewAddr, 2, offlineDir)
	offlineView := client.NewView(2)
	if err := offline.Close(ctx); err != nil {
		t.Fatal(err)
	}
	online := startClient(t, viewAddr, 2, "")
	onlineView := client.NewView(2)
	stopOnline := follow(online, onlineView)
	defer stopOnline()

	actors := map[int64]*actor{}
	for _, u := range []int64{1, 2, 3} {
		c := startClient(t, actorAddr, u, t.TempDir())
		actors[u] = &actor{user: u, c: c, conv: conv, view: client.NewView(u), rng: rand.New(rand.NewPCG(uint64(u), 42))}
		actors[u].stop = follow(c, actors[u].view)
		defer actors[u].stop()
	}

	const total = 300
	var made atomic.Int64
	half := make(chan struct{})
	var halfOnce sync.Once
	var wg sync.WaitGroup
	for _, a := range actors {
		wg.Go(func() {
			for made.Load() < total {
				if err := a.act(); err != nil {
					t.Errorf("user %d: %v", a.user, err)
					return
				}
				if made.Add(1) >= total/2 {
					halfOnce.Do(func() { close(half) })
				}
			}
		})
	}
	if midway != nil {
		<-half
		midway()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	last := lastSeqOf(t, pool, conv)
	t.Logf("%d changes made: last_seq %d, %s", made.Load(), last, tally(actors))

	// The offline device comes back on its persistent session.
	back := startClient(t, viewAddr, 2, offlineDir)
	stopBack := follow(back, offlineView)
	defer stopBack()
	testkit.WaitFor(t, 30*time.Second, "the devices to reach the last seq", func() bool {
		return onlineView.Position(conv) == last && offlineView.Position(conv) == last
	})

	fromHistory := client.NewView(2)
	for after := int64(0); after < last; {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, err := back.History(cctx, conv, client.HistoryOptions{AfterSeq: after, Forward: true, Limit: 200})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			t.Fatalf("history ends at %d, last_seq %d", after, last)
		}
		fromHistory.ApplyHistory(page)
		after = page[len(page)-1].Seq
	}
	want := normalize(fromHistory.Messages(conv))
	db := databaseView(t, pool, conv, 2)
	if !reflect.DeepEqual(want, db) {
		t.Fatalf("the view built from history differs from the database:\n%s", diff(want, db))
	}
	for name, v := range map[string]*client.View{"online": onlineView, "offline": offlineView} {
		if got := normalize(v.Messages(conv)); !reflect.DeepEqual(got, db) {
			t.Fatalf("the %s device's view differs from the database:\n%s", name, diff(got, db))
		}
	}
	if n := len(db); n == 0 {
		t.Fatal("no messages to compare")
	}
}

func startClient(t *testing.T, addr func() string, user int64, dir string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{
		Brokers:           []string{"mqtt://" + addr()},
		UserID:            user,
		Token:             testnode.Token(t, user),
		SessionDir:        dir,
		MaxReconnectDelay: 300 * time.Millisecond,
		RequestTimeout:    10 * time.Second,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("client of user %d: %v", user, err)
	}
	if err := c.AwaitConnection(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// follow applies c's events to v until stopped.
func follow(c *client.Client, v *client.View) (stop func()) {
	done := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-c.Events():
				if !ok {
					return
				}
				v.Apply(ev)
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// actor is one user making random changes to what it sees.
type actor struct {
	user int64
	c    *client.Client
	conv int64
	view *client.View
	rng  *rand.Rand
	stop func()
	// Outcomes by kind, refusals included.
	mu     sync.Mutex
	counts map[string]int
}

var emoji = []string{"👍", "❤️", "😂", "🎉", "🙏"}

func (a *actor) count(what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counts == nil {
		a.counts = map[string]int{}
	}
	a.counts[what]++
}

// act makes one change. A refusal the rules allow (a message recalled in
// the meantime, an edit window, another user's message) is counted, not
// failed: each rule has its own test.
func (a *actor) act() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs := a.view.Messages(a.conv)
	var mine []client.MessageView
	for _, m := range msgs {
		if m.SenderID == a.user && !m.Recalled {
			mine = append(mine, m)
		}
	}
	pick := func(from []client.MessageView) (client.MessageView, bool) {
		if len(from) == 0 {
			return client.MessageView{}, false
		}
		return from[a.rng.IntN(len(from))], true
	}
	var err error
	what := "send"
	switch r := a.rng.IntN(100); {
	case r < 35 || len(msgs) == 0:
		_, err = a.c.Send(ctx, a.conv, fmt.Sprintf("from %d: %s", a.user, strings.Repeat("x", a.rng.IntN(30))))
	case r < 50:
		what = "reply"
		m, _ := pick(msgs)
		_, err = a.c.SendMessage(ctx, a.conv, fmt.Sprintf("re %d", m.Seq), client.SendOptions{ReplyTo: m.Seq})
	case r < 65:
		what = "edit"
		m, ok := pick(mine)
		if !ok {
			return nil
		}
		_, err = a.c.Edit(ctx, a.conv, m.Seq, m.Body+" (edited)")
	case r < 72:
		what = "recall"
		m, ok := pick(mine)
		if a.user == 1 { // the owner may recall anyone's
			m, ok = pick(msgs)
		}
		if !ok {
			return nil
		}
		_, err = a.c.Recall(ctx, a.conv, m.Seq)
	default:
		what = "react"
		m, _ := pick(msgs)
		_, err = a.c.React(ctx, a.conv, m.Seq, emoji[a.rng.IntN(len(emoji))], a.rng.IntN(3) > 0)
	}
	var ce *client.Error
	switch {
	case err == nil:
		a.count(what)
	case errors.As(err, &ce) && slices.Contains([]string{"gone", "forbidden", "not_found", "conflict"}, ce.Code):
		a.count(what + " refused")
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func tally(actors map[int64]*actor) string {
	all := map[string]int{}
	for _, a := range actors {
		a.mu.Lock()
		for k, v := range a.counts {
			all[k] += v
		}
		a.mu.Unlock()
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(all)) {
		fmt.Fprintf(&b, "%s %d; ", k, all[k])
	}
	return b.String()
}

// shown is a message as a view shows it, comparable.
type shown struct {
	Sender    int64
	Body      string
	Edited    bool
	Recalled  bool
	ReplyTo   string // "seq:snippet" or "seq:recalled"
	Reactions string // "emoji=count(me)" sorted
}

func normalize(ms []client.MessageView) map[int64]shown {
	out := map[int64]shown{}
	for _, m := range ms {
		s := shown{Sender: m.SenderID, Body: m.Body, Edited: m.EditedAt != nil, Recalled: m.Recalled}
		if m.ReplyTo != nil {
			s.ReplyTo = fmt.Sprintf("%d:%s", m.ReplyTo.Seq, m.ReplyTo.Snippet)
			if m.ReplyTo.Recalled {
				s.ReplyTo = fmt.Sprintf("%d:recalled", m.ReplyTo.Seq)
			}
		}
		var rs []string
		for _, r := range m.Reactions {
			rs = append(rs, fmt.Sprintf("%s=%d(%v)", r.Emoji, r.Count, r.Me))
		}
		slices.Sort(rs)
		s.Reactions = strings.Join(rs, " ")
		out[m.Seq] = s
	}
	return out
}

// databaseView is the conversation's messages as the database holds them,
// as user me sees them.
func databaseView(t *testing.T, pool *pgxpool.Pool, conv, me int64) map[int64]shown {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT m.seq, m.sender_id, m.body, m.edited_at IS NOT NULL, m.recalled_at IS NOT NULL,
		       m.reply_to, left(r.body, 100), r.recalled_at IS NOT NULL,
		       COALESCE((SELECT string_agg(x.emoji || '=' || x.n || '(' || x.me || ')', ' ' ORDER BY x.emoji || '=' || x.n || '(' || x.me || ')')
		                 FROM (SELECT emoji, count(*) AS n, bool_or(user_id = $2) AS me FROM reaction
		                       WHERE conversation_id = m.conversation_id AND seq = m.seq GROUP BY emoji) x), '')
		FROM message m LEFT JOIN message r ON r.conversation_id = m.conversation_id AND r.seq = m.reply_to
		WHERE m.conversation_id = $1 AND m.kind = 'message' ORDER BY m.seq`, conv, me)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]shown{}
	for rows.Next() {
		var (
			seq           int64
			s             shown
			replyTo       *int64
			snip          *string
			replyRecalled *bool
		)
		if err := rows.Scan(&seq, &s.Sender, &s.Body, &s.Edited, &s.Recalled, &replyTo, &snip, &replyRecalled, &s.Reactions); err != nil {
			t.Fatal(err)
		}
		if s.Recalled {
			// The row keeps them (a resend is told from a reused
			// clientMsgId by them); a member sees none (protocol.md,
			// Recall).
			s.Edited, replyTo = false, nil
		}
		if replyTo != nil {
			s.ReplyTo = fmt.Sprintf("%d:%s", *replyTo, deref(snip))
			if replyRecalled != nil && *replyRecalled {
				s.ReplyTo = fmt.Sprintf("%d:recalled", *replyTo)
			}
		}
		out[seq] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func lastSeqOf(t *testing.T, pool *pgxpool.Pool, conv int64) int64 {
	t.Helper()
	return pgtest.QueryOne[int64](t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv)
}

func diff(a, b map[int64]shown) string {
	var out []string
	seqs := map[int64]bool{}
	for k := range a {
		seqs[k] = true
	}
	for k := range b {
		seqs[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(seqs)) {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("  seq %d: %+v\n     vs %+v", k, a[k], b[k]))
		}
		if len(out) > 10 {
			break
		}
	}
	return strings.Join(out, "\n")
}
