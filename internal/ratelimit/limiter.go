package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	chat "github.com/chatd/chatd"
)

// Config configures a Limiter; zero values take the defaults.
type Config struct {
	// RedisURL (redis://[:password@]host:port[/db], rediss:// for TLS)
	// shares the buckets between nodes; "" keeps them in memory.
	RedisURL string
	// Prefix of the Redis keys (default "chatd:rl:").
	Prefix string
	// Timeout of one Redis call (default 250ms); past it the local
	// buckets decide.
	Timeout time.Duration
	// RetryInterval: while Redis is failing, at most one request per
	// interval tries it again (default 1s).
	RetryInterval time.Duration
	// MaxKeys bounds the local buckets (default 1<<20).
	MaxKeys int
	// SweepInterval of the janitor that drops full local buckets (default
	// 10s: a per-user connect bucket is full again a second after a
	// connect, and a reconnect storm's buckets should not outstay it by
	// a minute; a sweep of 100,000 buckets takes about a millisecond).
	SweepInterval time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer // nil: metrics not registered
	// Now is the local clock (tests); default time.Now.
	Now func() time.Time
}

// Limiter is a chat.RateLimiter.
type Limiter struct {
	cfg   Config
	log   *slog.Logger
	local *local

	rdb      *redis.Client
	degraded atomic.Bool
	unsent   unsentRemovals // RemoveConns Redis did not take (conns.go)
	probeAt  atomic.Int64   // unix nanos before which a degraded limiter does not try Redis
	stateMu  sync.Mutex     // orders the transition logs

	limited  *prometheus.CounterVec
	fallback prometheus.Gauge

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ chat.RateLimiter = (*Limiter)(nil)

// New returns a Limiter and starts its janitor; stop it with Close. A
// malformed RedisURL is an error; an unreachable Redis is not (the local
// buckets decide until it answers).
func New(cfg Config) (*Limiter, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "chatd:rl:"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 250 * time.Millisecond
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 1 << 20
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Limiter{
		cfg:   cfg,
		log:   cfg.Logger,
		local: newLocal(cfg.MaxKeys, cfg.Now),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_rate_limited_total",
			Help: "Requests refused by a rate limit, by kind (send, conv, read, typing, api, connect, connect_user, upload)."}, []string{"kind"}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chat_rate_limiter_redis_fallback",
			Help: "1 while Redis is configured but unreachable and this node's local buckets decide."}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if cfg.RedisURL != "" {
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("parse redis url: %w", err)
		}
		opt.DialTimeout = cfg.Timeout
		opt.ReadTimeout = cfg.Timeout
		opt.WriteTimeout = cfg.Timeout
		opt.PoolTimeout = cfg.Timeout
		opt.MaxRetries = -1 // no retries: the local buckets are the fallback
		opt.ContextTimeoutEnabled = true
		l.rdb = redis.NewClient(opt)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(l.limited); err != nil {
			return nil, fmt.Errorf("register rate limit metrics: %w", err)
		}
		if err := cfg.Registerer.Register(l.fallback); err != nil {
			return nil, fmt.Errorf("register rate limit metrics: %w", err)
		}
	}
	go l.janitor()
	return l, nil
}

// Shared reports whether the buckets live in Redis (configured and answering).
func (l *Limiter) Shared() bool { return l.rdb != nil && !l.degraded.Load() }

// Take spends one token of kind/key's bucket.
func (l *Limiter) Take(ctx context.Context, kind chat.RateKind, key string, lim chat.RateLimit) chat.RateDecision {
	d := l.apply(ctx, kind, key, lim, 1)
	if !d.Allowed {
		l.limited.WithLabelValues(string(kind)).Inc()
	}
	return d
}

// Refund gives one token back to kind/key's bucket.
func (l *Limiter) Refund(ctx context.Context, kind chat.RateKind, key string, lim chat.RateLimit) {
	l.apply(ctx, kind, key, lim, -1)
}

func (l *Limiter) apply(ctx context.Context, kind chat.RateKind, key string, lim chat.RateLimit, cost float64) chat.RateDecision {
	if !lim.Enabled() {
		return chat.RateDecision{Allowed: true}
	}
	if l.rdb != nil && l.tryRedis() {
		d, err := l.redisTake(ctx, string(kind)+":"+key, lim, cost)
		if err == nil {
			l.healthy()
			return d
		}
		l.failed(err)
	}
	return l.local.take(string(kind), key, lim, cost)
}

// tryRedis reports whether this call should use Redis: always while it is
// healthy, and once per RetryInterval while it is failing.
func (l *Limiter) tryRedis() bool {
	if !l.degraded.Load() {
		return true
	}
	now := time.Now().UnixNano()
	at := l.probeAt.Load()
	return now >= at && l.probeAt.CompareAndSwap(at, now+int64(l.cfg.RetryInterval))
}

func (l *Limiter) failed(err error) {
	l.probeAt.Store(time.Now().Add(l.cfg.RetryInterval).UnixNano())
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if !l.degraded.Swap(true) {
		l.fallback.Set(1)
		l.log.Warn("redis unreachable: rate limits fall back to this node's local buckets", "err", err)
	}
}

func (l *Limiter) healthy() {
	if !l.degraded.Load() {
		return
	}
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if l.degraded.Swap(false) {
		l.fallback.Set(0)
		l.log.Info("redis reachable again: rate limits are shared between nodes")
	}
}

// takeScript is the token bucket of local.go, run atomically in Redis on
// Redis's clock. KEYS[1] is the bucket; ARGV: rate per second, burst, cost
// (negative refunds). It returns {allowed (0/1), tokens left (text)}.
var takeScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', KEYS[1], 'tk', 'ts')
local tokens = tonumber(v[1])
local ts = tonumber(v[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
  ts = now
end
if tokens > burst then tokens = burst end
local allowed = 0
if cost <= 0 then
  tokens = math.min(burst, tokens - cost)
  allowed = 1
elseif tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tk', string.format('%.6f', tokens), 'ts', string.format('%.0f', ts))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {allowed, string.format('%.6f', tokens)}
`)

func (l *Limiter) redisTake(ctx context.Context, name string, lim chat.RateLimit, cost float64) (chat.RateDecision, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
	defer cancel()
	res, err := takeScript.Run(ctx, l.rdb, []string{l.cfg.Prefix + name},
		strconv.FormatFloat(lim.Rate, 'f', -1, 64), lim.Burst, strconv.FormatFloat(cost, 'f', -1, 64)).Slice()
	if err != nil {
		return chat.RateDecision{}, fmt.Errorf("run token bucket script: %w", err)
	}
	if len(res) != 2 {
		return chat.RateDecision{}, fmt.Errorf("token bucket script returned %d values", len(res))
	}
	allowed, _ := res[0].(int64)
	s, _ := res[1].(string)
	tokens, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return chat.RateDecision{}, fmt.Errorf("token bucket script returned %q: %w", s, err)
	}
	return decide(allowed == 1, tokens, lim, cost), nil
}

func (l *Limiter) janitor() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.local.sweepAll()
		}
	}
}

// Close stops the janitor and closes the Redis client. It is idempotent.
func (l *Limiter) Close(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		if l.rdb != nil {
			if cerr := l.rdb.Close(); cerr != nil {
				err = fmt.Errorf("close redis client: %w", cerr)
			}
		}
	})
	select {
	case <-l.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}
