package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConnTTL is how long a connection recorded in Redis counts without its
// node refreshing it: a node that dies stops refreshing, and its
// connections stop counting ConnTTL later.
const ConnTTL = 90 * time.Second

// ConnRefreshInterval is how often a node should call RefreshConns.
const ConnRefreshInterval = 30 * time.Second

// Connection counts per user across nodes, in Redis. Per user, a sorted set
// holds the connected client ids scored by when they stop counting, and a
// hash holds which node each one is on; both are in one hash slot
// ({user}). A client id counts once however many nodes claim it: a device
// that moved to another node (a reconnect through the load balancer before
// the old node noticed) is the same device. Only the node a client id is
// on removes it.

// addConnScript: KEYS[1] set, KEYS[2] owners; ARGV: client id, node, max,
// ttl ms. Returns 1 when the client id may connect (already counted, or the
// user is under max), 0 when the user is at max.
var addConnScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
`)

// removeConnScript: KEYS as above; ARGV: client id, node.
var removeConnScript = redis.NewScript(`
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
end
return 1
`)

// refreshConnScript: KEYS as above; ARGV: node, ttl ms, client ids...
// A client id another node holds (it connected there since: a device
// that moved before this node noticed its old connection end) stays
// that node's: taken, this node's removal of its dead connection would
// uncount the live one. One no node holds (made while Redis failed,
// removed meanwhile) or whose node stopped refreshing it is taken.
var refreshConnScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i = 3, #ARGV do
  local owner = redis.call('HGET', KEYS[2], ARGV[i])
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if not owner or owner == ARGV[1] or not score or tonumber(score) <= now then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
`)

func (l *Limiter) connKeys(user int64) []string {
	k := l.cfg.Prefix + "conn:{" + strconv.FormatInt(user, 10) + "}"
	return []string{k, k + ":node"}
}

// SharesConns reports whether connection counts go to Redis at all
// (RedisURL configured); while Redis is failing, AddConn allows and the
// caller's own count decides.
func (l *Limiter) SharesConns() bool { return l.rdb != nil }

// unsentRemovals are the RemoveConns made while Redis failed: each is
// made once Redis answers (the next AddConn of its user, the next
// RefreshConns), or the connection would count until its entry expires
// (ConnTTL) and keep a device that replaced it out. A client id that
// connects again meanwhile is no removal any more. Past maxUnsent all are
// dropped: their entries expire anyway.
type unsentRemovals struct {
	mu sync.Mutex
	m  map[userClient]unsentRemoval
}

type userClient struct {
	user     int64
	clientID string
}

type unsentRemoval struct {
	node string
	at   time.Time
}

const maxUnsent = 100000

func (u *unsentRemovals) add(user int64, clientID, node string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil || len(u.m) >= maxUnsent {
		u.m = map[userClient]unsentRemoval{}
	}
	u.m[userClient{user, clientID}] = unsentRemoval{node, time.Now()}
}

// forget drops the removal of user's clientID (it connects again).
func (u *unsentRemovals) forget(user int64, clientID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, userClient{user, clientID})
}

func (u *unsentRemovals) empty() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.m) == 0
}

// take returns and drops the removals still worth making, of user only
// (user > 0) or of everyone (user 0).
func (u *unsentRemovals) take(user int64) map[userClient]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out map[userClient]string
	for k, r := range u.m {
		if user > 0 && k.user != user {
			continue
		}
		delete(u.m, k)
		if time.Since(r.at) < ConnTTL {
			if out == nil {
				out = map[userClient]string{}
			}
			out[k] = r.node
		}
	}
	return out
}

// AddConn records that user connects with clientID on node and reports
// whether that keeps the user within max distinct client ids on all nodes
// together. Without Redis, or while it fails, it allows (the node's own
// count is the limit then, as for the rate limits).
func (l *Limiter) AddConn(ctx context.Context, user int64, clientID, node string, max int) bool {
	if l.rdb == nil || max <= 0 {
		return true
	}
	l.unsent.forget(user, clientID)
	if !l.tryRedis() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
	defer cancel()
	for k, n := range l.unsent.take(user) {
		if err := removeConnScript.Run(ctx, l.rdb, l.connKeys(k.user), k.clientID, n).Err(); err != nil {
			l.unsent.add(k.user, k.clientID, n)
		}
	}
	n, err := addConnScript.Run(ctx, l.rdb, l.connKeys(user), clientID, node, max, ConnTTL.Milliseconds()).Int()
	if err != nil {
		l.failed(fmt.Errorf("add connection: %w", err))
		return true
	}
	l.healthy()
	return n == 1
}

// RemoveConn forgets clientID of user if node is the node it is on.
func (l *Limiter) RemoveConn(ctx context.Context, user int64, clientID, node string) {
	if l.rdb == nil {
		return
	}
	if !l.tryRedis() {
		l.unsent.add(user, clientID, node)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
	defer cancel()
	if err := removeConnScript.Run(ctx, l.rdb, l.connKeys(user), clientID, node).Err(); err != nil {
		l.unsent.add(user, clientID, node)
		l.failed(fmt.Errorf("remove connection: %w", err))
		return
	}
	l.healthy()
}

// RefreshConns records again every connection node holds (user -> client
// ids), so they keep counting, and so that the ones made while Redis was
// unreachable count from now on; a client id another node holds now stays
// that node's. It also makes the removals Redis did not take. Call it
// every ConnRefreshInterval.
func (l *Limiter) RefreshConns(ctx context.Context, node string, conns map[int64][]string) error {
	if l.rdb == nil || len(conns) == 0 && l.unsent.empty() || !l.tryRedis() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	unsent := l.unsent.take(0)
	for k, n := range unsent {
		if !slices.Contains(conns[k.user], k.clientID) {
			removeConnScript.Eval(ctx, pipe, l.connKeys(k.user), k.clientID, n)
		}
	}
	for user, ids := range conns {
		args := make([]any, 0, len(ids)+2)
		args = append(args, node, ConnTTL.Milliseconds())
		for _, id := range ids {
			args = append(args, id)
		}
		// EVAL, not EVALSHA: a pipeline cannot fall back when Redis does
		// not have the script cached.
		refreshConnScript.Eval(ctx, pipe, l.connKeys(user), args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		for k, n := range unsent {
			l.unsent.add(k.user, k.clientID, n)
		}
		l.failed(fmt.Errorf("refresh connections: %w", err))
		return fmt.Errorf("refresh connections in redis: %w", err)
	}
	l.healthy()
	return nil
}
