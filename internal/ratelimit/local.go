package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/shrink"
)

const shards = 64

// local is a set of in-memory token buckets.
type local struct {
	seed    maphash.Seed
	shards  [shards]shard
	maxKeys int // per shard
	now     func() time.Time
}

// A bucket is kept under the 64-bit hash of its name, by value: no string
// or bucket of its own on the heap per key, so the buckets a burst of
// connects creates are not scattered one by one among that burst's
// garbage (each pinning its span after the connections have gone). Two
// names whose hashes collide (about one chance in 40 million with a
// million live keys) share a bucket, which errs on the side of limiting.
type shard struct {
	mu   sync.Mutex
	m    map[uint64]bucket
	peak int // the most buckets m held since it was last copied (shrink.Map)
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
		l.shards[i].m = map[uint64]bucket{}
	}
	return l
}

// hash is the key of the bucket named kind:key, the name the Redis
// buckets go by (Limiter.apply), hashed without building it.
func (l *local) hash(kind, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(l.seed)
	_, _ = h.WriteString(kind)
	_ = h.WriteByte(':')
	_, _ = h.WriteString(key)
	return h.Sum64()
}

// take spends cost tokens (a negative cost refunds) from the bucket named
// kind:key.
func (l *local) take(kind, key string, lim chat.RateLimit, cost float64) chat.RateDecision {
	now := l.now()
	h := l.hash(kind, key)
	sh := &l.shards[h%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.m[h]
	if !ok {
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
		b = bucket{tokens: float64(lim.Burst), last: now}
	}
	b.rate, b.burst = lim.Rate, float64(lim.Burst)
	b.refill(now)
	d := spend(&b.tokens, lim, cost)
	sh.m[h] = b
	return d
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
	sh.m = shrink.Map(sh.m, &sh.peak) // records the peak since the last sweep
	defer func() { sh.m = shrink.Map(sh.m, &sh.peak) }()
	n := 0
	for k, b := range sh.m {
		b.refill(now)
		if b.tokens >= b.burst {
			delete(sh.m, k)
			n++
			continue
		}
		sh.m[k] = b
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
