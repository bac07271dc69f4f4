package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/webpushtest"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// rig is one database, a store that publishes to the pushers, a loopback
// push endpoint and any number of pushers (nodes).
type rig struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *store.Store
	ep      *webpushtest.Endpoint
	keys    push.VAPIDKeys
	devices *push.Devices
	fan     *fanout
	cfg     push.Config
}

// fanout hands committed events to every pusher started so far.
type fanout struct {
	mu sync.Mutex
	ps []*push.Pusher
}

func (f *fanout) Publish(evs ...chat.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.ps {
		p.Publish(evs...)
	}
}

func newRig(t *testing.T) *rig {
	t.Helper()
	f := &fanout{}
	st, pool := pgtest.NewStore(t, chat.DefaultLimits(), store.WithPublisher(f))
	keys, err := push.LoadOrCreateVAPID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ep := webpushtest.NewEndpoint(keys.Public)
	t.Cleanup(ep.Close)
	r := &rig{t: t, pool: pool, ep: ep, keys: keys, fan: f, store: st,
		devices: push.NewDevices(pool, keys.Public, true, false),
		cfg: push.Config{Pool: pool, VAPID: keys, AllowPrivate: true, Delay: 300 * time.Millisecond, MinInterval: time.Second,
			Tick: 20 * time.Millisecond, LeaseInterval: 100 * time.Millisecond, Timeout: 2 * time.Second,
			BackoffMin: 100 * time.Millisecond, BackoffMax: 300 * time.Millisecond},
	}
	return r
}

// start runs a pusher until the test ends (or stop is called).
func (r *rig) start(mod func(*push.Config)) (stop func()) {
	r.t.Helper()
	cfg := r.cfg
	if mod != nil {
		mod(&cfg)
	}
	p, err := push.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.fan.mu.Lock()
	r.fan.ps = append(r.fan.ps, p)
	r.fan.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	r.t.Cleanup(stop)
	return stop
}

// toBob starts a rig's pusher (mod changes its Config; nil: none) and
// makes a direct conversation of users 1 and 2, bob (2) with one device.
func toBob(t *testing.T, mod func(*push.Config)) (*rig, int64) {
	t.Helper()
	r := newRig(t)
	r.start(mod)
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	return r, conv
}

// previewShownToBob has user 1 send body to bob (toBob, with previews)
// and returns once the push previewing it was sent.
func previewShownToBob(t *testing.T, body string) (r *rig, conv, seq int64) {
	t.Helper()
	r, conv = toBob(t, func(c *push.Config) { c.Preview = true })
	seq = r.send(conv, 1, body)
	r.waitPushes("bob", 1, 3*time.Second)
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
	return r, conv, seq
}

func (r *rig) group(creator int64, members ...int64) int64 {
	r.t.Helper()
	c, _, err := r.store.CreateGroup(context.Background(), chat.GroupRequest{CreatorID: creator, Title: "team", Members: members})
	if err != nil {
		r.t.Fatal(err)
	}
	return c.ID
}

func (r *rig) direct(a, b int64) int64 {
	r.t.Helper()
	c, _, err := r.store.OpenDirect(context.Background(), a, b)
	if err != nil {
		r.t.Fatal(err)
	}
	return c.ID
}

func (r *rig) send(conv, from int64, body string) int64 {
	r.t.Helper()
	res, err := r.store.Send(context.Background(), chat.SendRequest{ConversationID: conv, SenderID: from, ClientMsgID: uuid.NewString(), Body: body})
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Message.Seq
}

// subscribe registers a webpush device of user at the loopback endpoint.
func (r *rig) subscribe(user int64, name string) int64 {
	r.t.Helper()
	url, sub := r.ep.Subscribe(name)
	id, _, err := r.devices.RegisterDevice(context.Background(), user, chat.DeviceRequest{Platform: "webpush", Endpoint: url,
		Keys: &chat.DeviceKeys{P256dh: sub.P256dh(), Auth: sub.AuthB64()}}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// settings sets user's settings of conv (a mute, its mentions).
func (r *rig) settings(conv, user int64, s chat.ConversationSettings) {
	r.t.Helper()
	if _, err := r.devices.SetSettings(context.Background(), conv, user, s); err != nil {
		r.t.Fatal(err)
	}
}

// ack records what a PUBACK of user's session flushes: the delivered
// watermark.
func (r *rig) ack(conv, user, seq int64) {
	r.t.Helper()
	if _, err := r.pool.Exec(context.Background(), `INSERT INTO member_delivery (conversation_id, user_id, delivered_seq)
VALUES ($1, $2, $3) ON CONFLICT (conversation_id, user_id) DO UPDATE SET delivered_seq = GREATEST(member_delivery.delivered_seq, EXCLUDED.delivered_seq)`, conv, user, seq); err != nil {
		r.t.Fatal(err)
	}
}

func notifications(t *testing.T, ps []webpushtest.Push) []push.Notification {
	t.Helper()
	var out []push.Notification
	for _, p := range ps {
		var n push.Notification
		if err := json.Unmarshal(p.Plaintext, &n); err != nil {
			t.Fatalf("payload %q: %v", p.Plaintext, err)
		}
		out = append(out, n)
	}
	return out
}

// waitPushes waits until subscription name got n accepted pushes.
func (r *rig) waitPushes(name string, n int, within time.Duration) []push.Notification {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if got := r.ep.Of(name); len(got) >= n {
			return notifications(r.t, got)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: %d pushes after %v, want %d (all requests: %s)\njobs:\n%s", name, len(r.ep.Of(name)), within, n, describe(r.ep.Pushes()), dumpJobs(r))
		}
		select {
		case <-r.ep.Notify():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitRequests waits until the endpoint got n requests (pushes or
// removes, whatever it answered); what names them in a failure.
func (r *rig) waitRequests(n int, within time.Duration, what string) {
	r.t.Helper()
	testkit.WaitFor(r.t, within, what, func() bool { return len(r.ep.Pushes()) >= n })
}

// waitCount polls sql until it answers want.
func (r *rig) waitCount(want int64, within time.Duration, sql string, args ...any) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := r.count(sql, args...)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: %d after %v, want %d\njobs:\n%s", sql, n, within, want, dumpJobs(r))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quiet asserts subscription name gets no more than n pushes for d.
func (r *rig) quiet(name string, n int, d time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if got := r.ep.Of(name); len(got) > n {
			r.t.Fatalf("%s: %d pushes, want %d: %s", name, len(got), n, describe(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(ps []webpushtest.Push) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("\n  %s status=%d err=%v %s", p.Path, p.Status, p.Err, p.Plaintext)
	}
	return s
}

// decideTwice races two decisions on conv's pushes, each in its own
// transaction: first checks what the first decided; the second must wait
// for the first to commit (300 ms without an answer), then commits too.
// It returns how many jobs the second wrote, or why it failed.
func (r *rig) decideTwice(conv int64, first func(n int, err error)) (int, error) {
	t := r.t
	t.Helper()
	p := r.pusher()
	ctx := context.Background()
	tx1, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	first(push.DecideInTx(ctx, p, tx1, []int64{conv}))
	second := testkit.Start(t, "the second decision", func() (int, error) {
		return r.decide(ctx, p, conv)
	}, func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
	if second.Returned() {
		n, err := second.Wait()
		t.Fatalf("the second decision did not wait for the first (%d jobs, %v)", n, err)
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return second.Wait()
}

// decide makes p's push decision for conv in a transaction of its own.
func (r *rig) decide(ctx context.Context, p *push.Pusher, conv int64) (int, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	n, err := push.DecideInTx(ctx, p, tx, []int64{conv})
	if err == nil {
		err = tx.Commit(ctx)
	}
	return n, err
}

// removalHeldAtTheOutbox starts the removal of user 2 from conv and
// holds it after its delete: the test locks the outbox it writes next in
// hold, which the test commits (or the cleanup rolls back).
func (r *rig) removalHeldAtTheOutbox(t *testing.T, ctx context.Context, conv int64) (hold pgx.Tx, removed *testkit.Pending[struct{}]) {
	t.Helper()
	hold, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `LOCK TABLE outbox IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	removed = testkit.Start(t, "the removal", func() (struct{}, error) {
		return struct{}{}, r.store.RemoveMember(ctx, conv, 1, 2)
	}, func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
	if removed.Returned() {
		t.Fatal("the removal did not wait for the outbox the test holds")
	}
	return hold, removed
}

func (r *rig) count(sql string, args ...any) int64 {
	r.t.Helper()
	return pgtest.QueryOne[int64](r.t, r.pool, sql, args...)
}
