package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newTestLimiter(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func TestLocalBucketBurstRefillAndRefund(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	l := newTestLimiter(t, Config{Now: c.Now, Registerer: reg})
	ctx := context.Background()
	lim := chat.RateLimit{Rate: 10, Burst: 30}
	for i := range 30 {
		d := l.Take(ctx, chat.RateSend, "1", lim)
		if !d.Allowed || d.Remaining != 29-i || d.Limit != 30 {
			t.Fatalf("take %d: %+v", i, d)
		}
	}
	d := l.Take(ctx, chat.RateSend, "1", lim)
	if d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Reset != 3*time.Second || d.Remaining != 0 {
		t.Fatalf("31st take: %+v, want refused, retry 100ms, reset 3s", d)
	}
	if !l.Take(ctx, chat.RateSend, "2", lim).Allowed {
		t.Fatal("another key is limited")
	}
	c.Advance(250 * time.Millisecond) // 2.5 tokens
	for i := range 2 {
		if !l.Take(ctx, chat.RateSend, "1", lim).Allowed {
			t.Fatalf("refilled take %d refused", i)
		}
	}
	if l.Take(ctx, chat.RateSend, "1", lim).Allowed {
		t.Fatal("half a token allowed a take")
	}
	l.Refund(ctx, chat.RateSend, "1", lim)
	if !l.Take(ctx, chat.RateSend, "1", lim).Allowed {
		t.Fatal("refunded token not available")
	}
	if got := testutil.ToFloat64(l.limited.WithLabelValues("send")); got != 2 {
		t.Fatalf("chat_rate_limited_total{kind=send} = %v, want 2", got)
	}
	// Unlimited never refuses and keeps no bucket.
	before := l.local.size()
	for range 1000 {
		if !l.Take(ctx, chat.RateSend, "3", chat.RateLimit{}).Allowed {
			t.Fatal("unlimited refused")
		}
	}
	if l.local.size() != before {
		t.Fatal("unlimited keeps a bucket")
	}
}

func TestRefundNeverExceedsBurst(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	l := newTestLimiter(t, Config{Now: c.Now})
	ctx := context.Background()
	lim := chat.RateLimit{Rate: 1, Burst: 3}
	for range 10 {
		l.Refund(ctx, chat.RateConv, "7", lim)
	}
	n := 0
	for l.Take(ctx, chat.RateConv, "7", lim).Allowed {
		n++
	}
	if n != 3 {
		t.Fatalf("took %d tokens after refunds, want the burst 3", n)
	}
}

func TestIdleBucketsAreEvicted(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	l := newTestLimiter(t, Config{Now: c.Now, MaxKeys: 64 * 16})
	ctx := context.Background()
	lim := chat.RateLimit{Rate: 10, Burst: 5}
	for i := range 10000 {
		l.Take(ctx, chat.RateAPI, fmt.Sprint(i), lim)
		if i%100 == 0 {
			c.Advance(10 * time.Millisecond)
		}
	}
	if n := l.local.size(); n > 64*16 {
		t.Fatalf("%d buckets held, bound is %d", n, 64*16)
	}
	c.Advance(time.Second) // every bucket is full again
	if left := l.local.sweepAll(); left != 0 {
		t.Fatalf("%d buckets left after a sweep of idle ones", left)
	}
}

func TestRedisBucketIsSharedAndFallsBackOnce(t *testing.T) {
	url, stop := redistest.Start(t)
	logs := &logtest.Counter{}
	a := newTestLimiter(t, Config{RedisURL: url, Logger: slog.New(logs), RetryInterval: 50 * time.Millisecond})
	b := newTestLimiter(t, Config{RedisURL: url})
	ctx := context.Background()
	lim := chat.RateLimit{Rate: 0.01, Burst: 10}
	allowed := 0
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if d := l.Take(ctx, chat.RateSend, "42", lim); d.Allowed {
			allowed++
		} else if d.RetryAfter <= 0 || d.Limit != 10 {
			t.Fatalf("refusal without retry information: %+v", d)
		}
	}
	if allowed != 10 {
		t.Fatalf("two limiters on one Redis allowed %d of 40, want the shared burst 10", allowed)
	}
	if !a.Shared() {
		t.Fatal("limiter with a healthy Redis is not shared")
	}
	a.Refund(ctx, chat.RateSend, "42", lim)
	if !b.Take(ctx, chat.RateSend, "42", lim).Allowed {
		t.Fatal("a refund on one limiter is not seen by the other")
	}

	stop()
	local := 0
	for range 200 {
		if a.Take(ctx, chat.RateSend, "42", lim).Allowed {
			local++
		}
		time.Sleep(time.Millisecond)
	}
	if local != 10 {
		t.Fatalf("after Redis stopped, the local bucket allowed %d, want its burst 10", local)
	}
	if a.Shared() {
		t.Fatal("limiter claims to be shared with Redis down")
	}
	if n := logs.Count("redis unreachable"); n != 1 {
		t.Fatalf("fallback logged %d times, want once", n)
	}

	// Redis comes back (empty): the next probe finds it, logged once.
	port := strings.TrimSuffix(strings.TrimPrefix(url, "redis://127.0.0.1:"), "/0")
	var p int
	fmt.Sscan(port, &p)
	redistest.StartOn(t, p)
	deadline := time.Now().Add(5 * time.Second)
	for !a.Shared() {
		if time.Now().After(deadline) {
			t.Fatal("limiter did not return to Redis")
		}
		a.Take(ctx, chat.RateSend, "43", lim)
		time.Sleep(10 * time.Millisecond)
	}
	for range 20 {
		a.Take(ctx, chat.RateSend, "43", lim)
	}
	if n := logs.Count("redis reachable again"); n != 1 {
		t.Fatalf("recovery logged %d times, want once", n)
	}
	if n := logs.Count("redis unreachable"); n != 1 {
		t.Fatalf("fallback logged %d times after recovery, want once", n)
	}
}

// A connect burst checks a bucket per user; what the check leaves on the
// heap outlives the burst's garbage and keeps its memory in use after the
// connections have gone, so a local check allocates nothing, not even for
// a new key.
func TestALocalCheckAllocatesNothingEvenForANewKey(t *testing.T) {
	l, c := janitorless(t)
	ctx := context.Background()
	lim := chat.RateLimit{Rate: 1, Burst: 5}
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprint(1000000 + i)
	}
	// Grow the maps first (a map's growth is not what this is about), then
	// let every bucket refill and be swept: the keys are new again.
	for _, k := range keys {
		l.Take(ctx, chat.RateConnectUser, k, lim)
	}
	refillAndSweep(t, l, c, time.Minute)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		l.Take(ctx, chat.RateConnectUser, keys[i%len(keys)], lim)
		i++
	}); n != 0 {
		t.Fatalf("%.1f allocations per Take, want none", n)
	}
	if got := l.local.size(); got != 1001 { // AllocsPerRun's warm-up run and its 1,000
		t.Fatalf("%d buckets, want 1001", got)
	}
}

// The buckets of a reconnect storm carry nothing once they have refilled:
// the sweep drops them and gives back the room the storm grew the maps to.
func TestSweptBucketsGiveBackTheirMemory(t *testing.T) {
	l, c := janitorless(t)
	ctx := context.Background()
	lim := chat.RateLimit{Rate: 1, Burst: 20}
	testkit.GivesBack(t, "50,000 buckets", 10, func() {
		for i := range 50000 {
			l.Take(ctx, chat.RateConnectUser, strconv.Itoa(i), lim)
		}
	}, func() {
		refillAndSweep(t, l, c, time.Second)
	})
}

// janitorless is a limiter on a clock the test moves, whose janitor never
// runs: the test sweeps.
func janitorless(t *testing.T) (*Limiter, *clock) {
	c := &clock{now: time.Unix(1000, 0)}
	return newTestLimiter(t, Config{Now: c.Now, SweepInterval: time.Hour}), c
}

// refillAndSweep moves the clock by d, after which every bucket is full
// again, and sweeps: no bucket may be left.
func refillAndSweep(t *testing.T, l *Limiter, c *clock, d time.Duration) {
	t.Helper()
	c.Advance(d)
	if left := l.local.sweepAll(); left != 0 {
		t.Fatalf("%d buckets left after they refilled", left)
	}
}

// chat_rate_limited_total's help names every kind it counts, as
// docs/operations.md does: upload was counted but left out of it.
func TestRateLimitedHelpNamesEveryKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := newTestLimiter(t, Config{Registerer: reg})
	for _, k := range []chat.RateKind{chat.RateSend, chat.RateConv, chat.RateRead, chat.RateTyping,
		chat.RateAPI, chat.RateConnect, chat.RateConnectUser, chat.RateUpload} {
		l.limited.WithLabelValues(string(k))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "chat_rate_limited_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			kind := m.GetLabel()[0].GetValue()
			named := false
			for _, w := range strings.FieldsFunc(mf.GetHelp(), func(r rune) bool { return strings.ContainsRune(" ,()", r) }) {
				named = named || w == kind
			}
			if !named {
				t.Errorf("help %q does not name kind %q", mf.GetHelp(), kind)
			}
		}
		return
	}
	t.Fatal("chat_rate_limited_total not registered")
}
