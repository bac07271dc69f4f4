package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	chat "github.com/chatd/chatd"
)

const shards = 64

// local is a set of in-memory token buckets.
type local struct {
	seed    maphash.Seed
	shards  [shards]shard
	maxKeys int // per shard
	now     func() time.Time
}

type shard struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
	rate   float64
	burst  float64
}

func newLocal(maxKeys int, now func() time.Time) *local {
	l := &local{seed: maphash.MakeSeed(), maxKeys: max(maxKeys/shards, 16), now: now}
	for i := range l.shards {
		l.shards[i].m = map[string]*bucket{}
	}
	return l
}

func (l *local) shard(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)%shards]
}

// take spends cost tokens (a negative cost refunds) from key's bucket.
func (l *local) take(key string, lim chat.RateLimit, cost float64) chat.RateDecision {
	now := l.now()
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[key]
	if b == nil {
		if len(sh.m) >= l.maxKeys {
			sh.sweep(now)
			// Under a flood of distinct keys, forget arbitrary buckets
			// rather than grow without bound: a forgotten bucket starts
			// full again, which errs on the side of allowing.
			for k := range sh.m {
				if len(sh.m) < l.maxKeys {
					break
				}
				delete(sh.m, k)
			}
		}
		b = &bucket{tokens: float64(lim.Burst), last: now}
		sh.m[key] = b
	}
	b.rate, b.burst = lim.Rate, float64(lim.Burst)
	b.refill(now)
	return spend(&b.tokens, lim, cost)
}

func (b *bucket) refill(now time.Time) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el*b.rate)
		b.last = now
	}
	if b.tokens > b.burst { // the burst was lowered
		b.tokens = b.burst
	}
}

// spend applies cost to tokens and describes the outcome; the Redis script
// implements the same rule.
func spend(tokens *float64, lim chat.RateLimit, cost float64) chat.RateDecision {
	burst := float64(lim.Burst)
	allowed := true
	switch {
	case cost <= 0:
		*tokens = math.Min(burst, *tokens-cost)
	case *tokens >= cost:
		*tokens -= cost
	default:
		allowed = false
	}
	return decide(allowed, *tokens, lim, cost)
}

func decide(allowed bool, tokens float64, lim chat.RateLimit, cost float64) chat.RateDecision {
	d := chat.RateDecision{
		Allowed:   allowed,
		Limit:     lim.Burst,
		Remaining: int(math.Floor(math.Max(tokens, 0))),
		Reset:     seconds((float64(lim.Burst) - tokens) / lim.Rate),
	}
	if !allowed {
		d.RetryAfter = seconds((math.Max(cost, 1) - tokens) / lim.Rate)
	}
	return d
}

func seconds(s float64) time.Duration {
	if s <= 0 || math.IsNaN(s) {
		return 0
	}
	if s > 1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// sweep deletes the buckets that are full again; the caller holds sh.mu.
func (sh *shard) sweep(now time.Time) int {
	n := 0
	for k, b := range sh.m {
		b.refill(now)
		if b.tokens >= b.burst {
			delete(sh.m, k)
			n++
		}
	}
	return n
}

// sweepAll sweeps every shard and returns how many buckets remain.
func (l *local) sweepAll() int {
	now := l.now()
	left := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.sweep(now)
		left += len(sh.m)
		sh.mu.Unlock()
	}
	return left
}

// size is the number of buckets held.
func (l *local) size() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
